"""A job's monitors when its processes run in a VM guest.

The guest's kernel is the one under test, so its /proc is what the monitors read: the
guest's agent reads the files each monitor names (ProcfsMonitor.paths) just before the
benchmark starts, every interval while it runs and just after it ended, on the guest's
clock (instruction-time under icount), and sends the texts back with the result
(executor.Readings). insn-profile asks the guest's emulator for the instructions of the
window instead (executor.InstructionCounts). Here the texts are parsed and reduced by the
same monitors, to the same metric names as on the host, when a repetition is collected.
perf-stat and perf-profile watch this machine's perf and do not run in a guest
(refused before anything boots: perflab.monitors.instrument).
"""

from __future__ import annotations

from collections.abc import Callable

from perflab.execution.executor import Hooks, InstructionCounts, Readings
from perflab.monitors import monitor_class, parse_options
from perflab.monitors.base import Collected, Monitor
from perflab.monitors.insns import InsnProfile
from perflab.monitors.procfs import ProcfsMonitor


class GuestMonitorSet:
    """The monitors of one run in a guest: requests to the guest per timed process, their answers
    reduced per repetition. A monitor whose files the guest cannot give is recorded and dropped."""

    def __init__(self, config: dict[str, dict], warn: Callable[[str], None] = lambda m: None, exact: bool = False):
        self.warn, self.exact = warn, exact
        self.active: list[Monitor] = []
        self.record: dict[str, dict] = {}
        self.pending: list[tuple[int | None, dict[str, object]]] = []
        for name, raw in config.items():
            options = parse_options(name, raw)
            self.record[name] = {"options": options.model_dump(mode="json"), "interval": options.interval,
                                 "status": "ran", "unsupported": [], "errors": [], "where": "in the VM guest"}
            self.active.append(monitor_class(name)(options))

    def __bool__(self) -> bool:
        return bool(self.active)

    def hooks(self, process: int | None = None) -> Hooks:
        asked: dict[str, object] = {}
        for mon in self.active:
            if isinstance(mon, ProcfsMonitor):
                asked[mon.name] = Readings(mon.paths, mon.options.interval)
            elif isinstance(mon, InsnProfile):
                asked[mon.name] = InstructionCounts()
        self.pending.append((process, asked))
        return Hooks(inside=list(asked.values()))

    def _failed(self, mon: Monitor, e: BaseException) -> None:
        entry = self.record[mon.name]
        entry["status"] = "failed"
        entry["errors"].append(f"{type(e).__name__}: {e}")
        self.warn(f"monitor {mon.name} failed in the guest ({e}); the run goes on without it")
        self.active.remove(mon)

    def collect(self) -> dict[str, Collected]:
        pending, self.pending = self.pending, []
        for process, asked in pending:
            for mon in list(self.active):
                answer = asked.get(mon.name)
                try:
                    if isinstance(answer, Readings) and answer.taken:
                        mon.replay(process, answer.taken)
                    elif isinstance(answer, InstructionCounts):
                        mon.replay_counts(answer, self.exact)
                except Exception as e:
                    self._failed(mon, e)
        out = {}
        for mon in list(self.active):
            try:
                out[mon.name] = mon.collect()
            except Exception as e:
                self._failed(mon, e)
        for mon in self.active:
            if isinstance(mon, InsnProfile) and mon.windows:
                self.record[mon.name]["notes"] = [f"counted over {' and '.join(sorted(mon.windows))}; functions "
                                                  f"named by {', '.join(sorted(mon.sources))}"]
        return out

    def close(self) -> None:
        self.active = []
