"""perf-stat and perf-profile: perf(1) beside the benchmark, only during its timed part.

- probe: what perf can do here (the binary, permission, tracepoints, which events
  this machine counts), found once per perflab process;
- control: perf started ahead of use under the launcher, disabled, and enabled
  through its control FIFO only for the timed part; PerfMonitor, what both share;
- stat: perf-stat (`perf stat -a -x; -I MS`), interval counts summed per event;
- profile: perf-profile (`perf record -a -g`), read back with `perf script` and
  reduced as `perf report --children` would.

docs/monitors-perf.md says what each records. The names below are re-exported so
that `perflab.monitors.perf.NAME` keeps working for the report and the tests.
"""

from perflab.monitors.perf.control import WORKDIR_PREFIX, ControlledPerf, PerfFailed, PerfMonitor
from perflab.monitors.perf.probe import (
    check_permission,
    expand_tracepoints,
    is_tracepoint,
    perf_binary,
    probe_events,
    tracefs_events,
)
from perflab.monitors.perf.profile import (
    FOLD_AWK,
    FOLDED,
    Frame,
    PerfProfile,
    PerfProfileOptions,
    Profile,
    ProfileSample,
    SymbolShare,
    metric_name,
    parse_perf_script,
    perf_script,
    profile_samples,
    reduce_profile,
    symbol_row,
    symbols_from_series,
)
from perflab.monitors.perf.stat import (
    DEFAULT_EVENTS,
    PerfStat,
    PerfStatOptions,
    StatPart,
    online_cpus,
    parse_stat_intervals,
    stat_samples,
)

__all__ = [
    "DEFAULT_EVENTS", "FOLD_AWK", "FOLDED", "WORKDIR_PREFIX", "ControlledPerf", "Frame", "PerfFailed", "PerfMonitor", "PerfProfile",
    "PerfProfileOptions", "PerfStat", "PerfStatOptions", "Profile", "ProfileSample", "StatPart", "SymbolShare",
    "check_permission", "expand_tracepoints", "is_tracepoint", "metric_name", "online_cpus", "parse_perf_script",
    "parse_stat_intervals", "perf_binary", "perf_script", "probe_events", "profile_samples", "reduce_profile",
    "stat_samples", "symbol_row", "symbols_from_series", "tracefs_events",
]
