"""One worker per box: a lock in the broker that a second worker of the box cannot take.

A box runs one job at a time (anything else on it is noise), so a second `perflab
worker --box B` refuses to start while the first holds `perflab:lock:B`, naming it.
The lock's value is the holder's name (HOST-PID); it expires unless the holder's
heartbeat renews it, so a worker that died on another host frees its box within a few
beats, and one that died on this host (its pid gone) is taken over at once: a worker
restarted right after a kill -9 does not have to wait.
"""

from __future__ import annotations

import os
import socket

from perflab.core.errors import PerflabError
from perflab.core.text import printable

# Renew when still ours, take when free; 1 renewed, 2 taken, 0 another worker holds it.
_RENEW = """
local holder = redis.call('get', KEYS[1])
if holder == ARGV[1] then redis.call('expire', KEYS[1], ARGV[2]) return 1 end
if not holder then redis.call('set', KEYS[1], ARGV[1], 'EX', ARGV[2]) return 2 end
return 0
"""
# Take over from `expected` (a dead worker of this host) only if it still holds the lock.
_TAKE_OVER = """
if redis.call('get', KEYS[1]) == ARGV[2] then redis.call('set', KEYS[1], ARGV[1], 'EX', ARGV[3]) return 1 end
return 0
"""
_RELEASE = """
if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end
return 0
"""


def lock_key(box: str) -> str:
    return f"perflab:lock:{box}"


def _dead_here(holder: str) -> bool:
    """The holder ran on this host and its process is gone."""
    host, _, pid = holder.rpartition("-")
    return host == socket.gethostname() and pid.isdigit() and not os.path.exists(f"/proc/{pid}")


class BoxLock:
    def __init__(self, redis, box: str, name: str, ttl_s: int):
        self.redis, self.box, self.name, self.ttl_s = redis, box, name, max(1, int(ttl_s))
        self.key = lock_key(box)

    def acquire(self) -> None:
        """Take the box; PerflabError naming the worker that holds it."""
        if self.renew():
            return
        holder = self.redis.get(self.key) or "?"
        if _dead_here(holder) and self.redis.eval(_TAKE_OVER, 1, self.key, self.name, holder, self.ttl_s):
            return
        if self.renew():   # it expired or was released meanwhile
            return
        left = self.redis.ttl(self.key)
        raise PerflabError(f"box {self.box} already has a worker: {printable(holder, 100)} holds {self.key}; a box "
                           f"runs one job at a time: stop that worker first (if it died on another host, "
                           f"its lock expires in {max(left, 0)} s)")

    def renew(self) -> bool:
        """Keep (or retake, after a broker that lost it) the lock; False if another worker holds it."""
        return bool(self.redis.eval(_RENEW, 1, self.key, self.name, self.ttl_s))

    def holder(self) -> str:
        return self.redis.get(self.key) or ""

    def release(self) -> None:
        try:
            self.redis.eval(_RELEASE, 1, self.key, self.name)
        except Exception:   # the broker away: the lock expires by itself
            pass


__all__ = ["BoxLock", "lock_key"]
