"""What perf can do on this machine, found once per perflab process.

Whether perf runs at all (Debian's /usr/bin/perf is a wrapper that fails without
the package for the running kernel), whether this process may count system-wide
(perf_event_paranoid, or root / CAP_PERFMON), which tracepoints this kernel has,
and which events this machine counts: an event perf does not know is an error
naming it; a counter the machine lacks ('<not supported>', e.g. hardware counters
in a VM) or a tracepoint this kernel lacks is a reason, listed as unsupported.
"""

from __future__ import annotations

import difflib
import fnmatch
import os
import re
import shutil
import subprocess
from pathlib import Path

from perflab.monitors.base import Unavailable

PARANOID = "/proc/sys/kernel/perf_event_paranoid"
TRACEFS_EVENTS = ("/sys/kernel/tracing/events", "/sys/kernel/debug/tracing/events")
SEP = ";"                 # perf stat's field separator (-x): PMU event terms may contain commas

# What this perflab process found out about perf, once (perf's start-up costs ~50 ms a call).
_DETECTED: dict[str, object] = {}


def _monitor_error(message: str) -> Exception:
    from perflab.monitors import MonitorError   # the package imports this module lazily

    return MonitorError(message)


def perf_binary() -> str:
    """The perf command, checked to run (Debian's /usr/bin/perf is a wrapper that fails without
    the package for the running kernel); Unavailable naming the package otherwise."""
    path = shutil.which("perf")
    key = f"binary:{path}"
    if key not in _DETECTED:
        found: object = Unavailable("perf not found: install the linux-perf package (perf for the running kernel)")
        if path:
            try:
                proc = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30)
                if proc.returncode == 0 and proc.stdout.startswith("perf version"):
                    found = path
                else:
                    why = (proc.stderr or proc.stdout).strip().splitlines()
                    if _is_refusal(proc.stderr + proc.stdout):
                        found = refused()
                    else:
                        found = Unavailable(f"{path} does not run ({why[0] if why else f'exit {proc.returncode}'}): "
                                            "install the linux-perf package for the running kernel")
            except (OSError, subprocess.TimeoutExpired) as e:
                found = Unavailable(f"{path} does not run ({e}): install the linux-perf package")
        _DETECTED[key] = found
    found = _DETECTED[key]
    if isinstance(found, Unavailable):
        raise found
    return str(found)


def _has_capability(bit: int) -> bool:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("CapEff:"):
                return bool(int(line.split()[1], 16) >> bit & 1)
    except (OSError, ValueError):
        pass
    return False


def _perfmon_capable() -> bool:
    # What the kernel checks (perfmon_capable()): the capabilities, not the uid. Root in a
    # container or under a dropped bounding set has uid 0 and neither.
    return _has_capability(38) or _has_capability(21)


def _who() -> str:
    if os.geteuid() == 0:
        return "this process is root without CAP_PERFMON and CAP_SYS_ADMIN (a container?)"
    return "this process is not root and has neither capability"


def refused(paranoid_path: str = PARANOID, tracepoints: bool = False, level: object = None) -> Unavailable:
    """perf refused by the kernel's access control: which sysctl or capability would let it count."""
    if level is None:
        try:
            level = int(Path(paranoid_path).read_text().split()[0])
        except (OSError, ValueError, IndexError):
            level = "unreadable"
    needed = -1 if tracepoints else 0
    what = "system-wide tracepoint counting" if tracepoints else "system-wide counting (perf -a)"
    return Unavailable(f"{paranoid_path} is {level}; {what} needs {needed} or lower "
                       f"(sysctl -w kernel.perf_event_paranoid={needed}) or the capability CAP_PERFMON "
                       f"(or CAP_SYS_ADMIN, e.g. setcap cap_perfmon+ep on perf); {_who()}")


def _is_refusal(output: str) -> bool:
    """perf's words when perf_event_open failed for want of permission (EACCES/EPERM)."""
    return any(w in output for w in ("perf_event_paranoid", "Access to performance monitoring",
                                     "Permission denied", "Operation not permitted"))


def check_permission(tracepoints: bool, paranoid_path: str = PARANOID, privileged: bool | None = None) -> None:
    """System-wide counting (-a) without CAP_PERFMON (38) / CAP_SYS_ADMIN (21) needs
    perf_event_paranoid <= 0, tracepoints <= -1."""
    if privileged is None:
        privileged = _perfmon_capable()
    if privileged:
        return
    try:
        level = int(Path(paranoid_path).read_text().split()[0])
    except (OSError, ValueError, IndexError) as e:
        raise Unavailable(f"cannot read {paranoid_path} ({e}); perf needs it to count system-wide") from None
    if level > (-1 if tracepoints else 0):
        raise refused(paranoid_path, tracepoints, level)


def is_tracepoint(event: str) -> bool:
    """`sched:sched_switch`, `pagefault:*` — not `cycles:u` (a modifier) nor `cpu/.../` (PMU terms)."""
    if "/" in event or ":" not in event:
        return False
    return not re.fullmatch(r"[ukhIGHpPSDWe]+", event.split(":", 1)[1])


def tracefs_events() -> Path | None:
    for d in TRACEFS_EVENTS:
        try:
            if os.path.isdir(d) and os.listdir(d):
                return Path(d)
        except OSError:
            continue
    return None


def expand_tracepoints(events: list[str]) -> tuple[list[str], list[str]]:
    """Tracepoint globs -> the tracepoints this kernel has; (events, unsupported with the reason).

    Without a readable tracefs the names are left to perf (it expands globs itself).
    """
    root = tracefs_events()
    out: list[str] = []
    unsupported: list[str] = []
    for event in events:
        if not is_tracepoint(event) or root is None:
            out.append(event)
            continue
        group, pattern = event.split(":", 1)
        gdir = root / group
        if not gdir.is_dir():
            unsupported.append(f"{event} (no tracepoint group {group!r} on this kernel)")
            continue
        names = sorted(n for n in os.listdir(gdir) if (gdir / n).is_dir())
        matched = [n for n in names if fnmatch.fnmatchcase(n, pattern)]
        if not matched:
            near = difflib.get_close_matches(pattern, names, n=2)
            hint = f"; near: {', '.join(f'{group}:{n}' for n in near)}" if near else ""
            unsupported.append(f"{event} (no such tracepoint on this kernel{hint})")
            continue
        out.extend(f"{group}:{n}" for n in matched if f"{group}:{n}" not in out)
    return out, unsupported


def _syntax_error(stderr: str) -> str | None:
    """perf's reason when it refused an event name ('unknown tracepoint', 'parser error' ...)."""
    if "event syntax error" not in stderr:
        return None
    for line in stderr.splitlines():
        if "\\___" in line:
            return line.split("\\___", 1)[1].strip()
    return "event syntax error"


def probe_events(events: list[str]) -> dict[str, str]:
    """Which events this machine counts: {event: "ok" | reason it cannot}. Cached per process.

    An event name perf does not know at all raises MonitorError (naming it, pointing at `perf
    list`); a tracepoint perf cannot find and a counter the machine lacks are reasons, not errors.
    """
    perf = perf_binary()
    todo = [e for e in events if f"event:{e}" not in _DETECTED]
    if todo:
        verdicts = _probe(perf, todo)
        if verdicts is None:   # perf refused the list: find the culprit(s) one by one
            verdicts = {}
            for e in todo:
                verdicts.update(_probe(perf, [e]) or {})
        for e, v in verdicts.items():
            _DETECTED[f"event:{e}"] = v
    out = {}
    for e in events:
        v = _DETECTED[f"event:{e}"]
        if isinstance(v, Exception):
            raise v
        out[e] = str(v)
    return out


def _probe(perf: str, events: list[str]) -> dict[str, object] | None:
    args = [perf, "stat", "-a", "-x", SEP]
    for e in events:
        args += ["-e", e]
    try:
        proc = subprocess.run([*args, "--", "true"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise Unavailable(f"perf stat does not run here: {e}") from None
    reason = _syntax_error(proc.stderr)
    if proc.returncode != 0 and reason is not None:
        if len(events) > 1:
            return None
        event = events[0]
        if is_tracepoint(event) or "tracepoint" in reason:
            return {event: f"not on this kernel (perf: {reason})"}
        return {event: _monitor_error(
            f"perf-stat: unknown event {event!r} (perf: {reason}); `perf list` lists the events this machine knows")}
    if proc.returncode != 0 and _is_refusal(proc.stderr):
        raise refused(tracepoints=any(is_tracepoint(e) for e in events))
    if proc.returncode != 0:
        words = [l.strip() for l in proc.stderr.splitlines() if l.strip()]
        raise Unavailable(f"perf stat -a fails here: {' | '.join(words[:3]) or f'exit {proc.returncode}'}")
    out: dict[str, object] = {e: "ok" for e in events}
    for line in proc.stderr.splitlines():
        parts = line.split(SEP)
        if len(parts) >= 3 and parts[0] == "<not supported>":
            name = parts[2]
            for e in events:
                if e == name or e.split(":")[0] == name.split(":")[0] and not is_tracepoint(e):
                    out[e] = "not supported by this machine"
    return out
