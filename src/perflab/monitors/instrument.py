"""A job's monitors as one instrument on the executor seam (perflab.execution.instruments).

Apart from perflab.monitors itself so that reading a store (`perflab detect`, which names
monitor metrics) does not load the executor's seam.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from perflab.execution.instruments import Figures, Instrument, Watch
from perflab.execution.targets import HOST_TOOLS, INSTRUCTION_COUNTS
from perflab.monitors import MonitorSet


@dataclass(frozen=True)
class Monitors(Instrument):
    """A job's monitors (its `monitors:` mapping, validated) as one instrument on the executor's
    hooks: they watch only the timed part of each recorded process. On this machine they read
    its /proc and run its perf; in a VM guest they read the guest's /proc and run this machine's
    perf there (through its agent: perflab.monitors.guest), and insn-profile counts the guest's
    instructions; on an SSH machine they read its /proc and run its own perf, through its agent."""

    name = "monitors"
    requires = frozenset()      # per monitor: each asks the target for what it needs (Monitor.needs)
    config: dict = field(default_factory=dict)

    def keys(self) -> dict:
        return {"monitors": self.config}

    def describe(self) -> str:
        return "monitors (" + ", ".join(self.config) + ")"

    def needs(self) -> frozenset[str]:
        # insn-profile: the emulator's counts; perf-stat and perf-profile: perf beside the processes
        # (in a guest the host's, over 9p; on an SSH machine its own: Target.perf_there).
        return frozenset({*((INSTRUCTION_COUNTS,) if "insn-profile" in self.config else ()),
                          *((HOST_TOOLS,) if {"perf-stat", "perf-profile"} & set(self.config) else ())})

    def refusal(self, target, what: str) -> str | None:
        from perflab.monitors import monitor_class

        for name in self.config:
            missing = [n for n in sorted(monitor_class(name).needs) if not target.offers(n)]
            if not missing:
                continue
            if missing == [INSTRUCTION_COUNTS] and not target.fulfils_far:
                return (f"{what}: monitor {name} counts the instructions of a VM guest: give the job a kernel "
                        "(--kernel PATH --vm icount)")
            return (f"{what}: monitor {name} watches this machine, not {target.describe()}; in a guest the "
                    f"/proc monitors, perf-stat and insn-profile run (leave {name} out)")
        return None

    def attach(self, what: str, warn=lambda message: None, target=None) -> Watch:
        if target is not None and target.fulfils_far:
            from perflab.monitors.guest import GuestMonitorSet

            # The place's agent reads the files where the processes run (a guest's, an SSH machine's).
            watching = GuestMonitorSet(self.config, warn=warn, exact=bool(target.exact_time), cpus=target.cpus() or 1,
                                       perf_there=target.perf_there)
            where = target.where_readings()
            if where:
                for record in watching.record.values():
                    record["where"] = where
            return _MonitorsWatch(watching)
        return _MonitorsWatch(MonitorSet(self.config, warn=warn))


class _MonitorsWatch(Watch):
    def __init__(self, monitors: MonitorSet):
        self.set = monitors

    def stored(self, store, run_id: int) -> None:
        # What failed or was unsupported along the way is recorded however the run ends.
        store.set_run_monitors(run_id, self.set.record)

    def hooks(self, index: int):
        # Monitors watch only the timed part: they start just before the process and stop just after it.
        return self.set.hooks(index) if self.set else None

    def repetition(self, repetition: int) -> Figures:
        figures = Figures()
        if not self.set:
            return figures
        for name, collected in self.set.collect().items():
            figures.samples += collected.samples
            if collected.series:
                figures.series[name] = collected.series
        return figures

    def close(self) -> None:
        self.set.close()
