"""A job's monitors as one instrument on the executor seam (perflab.execution.instruments).

Apart from perflab.monitors itself so that reading a store (`perflab detect`, which names
monitor metrics) does not load the executor's seam.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from perflab.execution.instruments import Figures, Instrument, Watch
from perflab.monitors import MonitorSet


@dataclass(frozen=True)
class Monitors(Instrument):
    """A job's monitors (its `monitors:` mapping, validated) as one instrument on the executor's
    hooks: they watch only the timed part of each recorded process. They read this machine's
    /proc and run its perf, so they watch jobs on the host."""

    name = "monitors"
    config: dict = field(default_factory=dict)

    def keys(self) -> dict:
        return {"monitors": self.config}

    def describe(self) -> str:
        return "monitors (" + ", ".join(self.config) + ")"

    def refusal(self, target, what: str) -> str | None:
        if target.kind in self.runs_in:
            return None
        return f"{what}: monitors watch the host, not {target.describe()}: a job with a kernel takes none"

    def attach(self, what: str, warn=lambda message: None) -> Watch:
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
