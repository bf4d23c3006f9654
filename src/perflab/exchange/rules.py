"""What a measured value can be: the rules a value read from a file must obey.

Shared by the perflab export reader (perflab.exchange.transfer) and the other
tools' importers (perflab.exchange.importers), so that both check perflab's own
figures of a command the same way; it imports neither, so the two stay one-way.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from perflab.core.model import EXIT, MAXRSS, SYS, USER, WALL

# -- what a measured value can be -------------------------------------------
# A rule names what a value is and the range it must lie in; every rule also
# refuses NaN and infinities. Elapsed (wall-clock) times are durations: a
# timer that read 0 or less was broken. CPU times can be 0 (rusage counts in
# ticks or microseconds), sizes, counts and rates can be 0; none can be
# negative. Other figures (user counters, differences such as LMbench's
# handler-minus-baseline) keep their sign.

@dataclass(frozen=True)
class Rule:
    what: str          # completes "-0.5 is not ..."
    minimum: float     # the least value accepted
    open_min: bool     # the minimum itself is refused
    integral: bool = False

    def accepts(self, value: float) -> bool:
        # An int from JSON can exceed what a float (the store's column) holds.
        if not -FLOAT_MAX <= value <= FLOAT_MAX:  # also false for NaN
            return False
        if self.integral and value != int(value):
            return False
        return value > self.minimum if self.open_min else value >= self.minimum

    def why_not(self, value) -> str:
        """The end of a message about a value this rule refuses."""
        shown = repr(value)
        if len(shown) > 40:
            shown = shown[:37] + "..."
        if not -FLOAT_MAX <= value <= FLOAT_MAX:
            return f"{shown} is not a finite number"
        return f"{shown} is not {self.what}"


FLOAT_MAX = 1.7976931348623157e308


DURATION = Rule("a positive duration", 0.0, True)
CPU_TIME = Rule("a CPU time (>= 0)", 0.0, False)
SIZE = Rule("a size (>= 0)", 0.0, False)
COUNT = Rule("a count (>= 0)", 0.0, False)
RATE = Rule("a rate (>= 0)", 0.0, False)
EXIT_STATUS = Rule("an exit status (an integer)", -math.inf, False, integral=True)
FINITE = Rule("a finite number", -math.inf, False)

# perflab's own figures of a command (perflab.benchmarks.cmd, and hyperfine's as
# imported), checked by what they mean wherever they are read.
METRIC_RULES = {WALL: DURATION, USER: CPU_TIME, SYS: CPU_TIME, MAXRSS: SIZE, EXIT: EXIT_STATUS}
