"""A job's monitors when its processes run in a VM guest.

The guest's kernel is the one under test, so its /proc is what the monitors read: the
guest's agent reads the files each monitor names (ProcfsMonitor.paths) just before the
benchmark starts, every interval while it runs and just after it ended, on the guest's
clock (instruction-time under icount), and sends the texts back with the result
(executor.Readings). insn-profile asks the guest's emulator for the instructions of the
window instead (executor.InstructionCounts). Here the texts are parsed and reduced by the
same monitors, to the same metric names as on the host, when a repetition is collected.
perf-stat and perf-profile run perf where the processes run, as the target says
(Target.perf_there): in a guest the host's perf (the host's root is shared over 9p), on an
SSH machine that machine's own perf, in the run directory. The agent starts it before the
benchmark, enables it just before and disables it just after through perf's control FIFO,
and sends its output back (executor.Helper); for perf-profile, `perf script`'s text, run
there so that that machine's kernel and binaries name the samples (perf.data is removed
there once read). sched_debug does not run in a guest (refused before anything boots).
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from perflab.core.errors import PerflabError
from perflab.core.model import INFORMATIONAL, Sample
from perflab.execution.executor import Helper, Hooks, InstructionCounts, Readings
from perflab.execution.targets import PerfThere
from perflab.monitors import monitor_class, parse_options
from perflab.monitors.base import Collected, Monitor, Unavailable
from perflab.monitors.perf.probe import perf_binary
from perflab.monitors.insns import InsnProfile
from perflab.monitors.perf.control import controlled
from perflab.monitors.perf.profile import (FOLD_AWK, PerfProfile, parse_perf_script, profile_samples, reduce_profile,
                                           script_argv, symbol_row)
from perflab.monitors.perf.stat import PerfStat, StatPart, parse_stat_intervals
from perflab.monitors.procfs import ProcfsMonitor


class GuestMonitorSet:
    """The monitors of one run in a guest: requests to the guest per timed process, their answers
    reduced per repetition. A monitor whose files the guest cannot give is recorded and dropped."""

    def __init__(self, config: dict[str, dict], warn: Callable[[str], None] = lambda m: None, exact: bool = False,
                 cpus: int = 1, perf_there: Callable[[], PerfThere | None] | None = None):
        self.warn, self.exact, self.cpus = warn, exact, cpus
        self.active: list[Monitor] = []
        self.record: dict[str, dict] = {}
        self.pending: list[tuple[int | None, dict[str, object]]] = []
        self.scripts: dict[str, list[str]] = {}     # perf-profile: perf script's text per process
        self.there: PerfThere | None = None         # how perf runs where the processes run
        for name, raw in config.items():
            options = parse_options(name, raw)
            self.record[name] = {"options": options.model_dump(mode="json"), "interval": options.interval,
                                 "status": "ran", "unsupported": [], "errors": [], "where": "in the VM guest"}
            mon = monitor_class(name)(options)
            if isinstance(mon, (PerfStat, PerfProfile)):
                try:
                    there = self._perf_there(perf_there)
                except Unavailable as e:
                    self.record[name].update(status="unavailable", errors=[str(e)])
                    warn(f"monitor {name} not run: {e}")
                    continue
                self.record[name]["notes"] = [there.said]
            if isinstance(mon, PerfStat):
                # As asked, but for what the machine there was found not to count (the probe here says
                # nothing of it); what perf then finds not supported there is listed as it reports.
                mon.events = [e for e in options.events if e not in there.unsupported]
                left = [e for e in options.events if e in there.unsupported]
                if left:
                    self.record[name]["unsupported"] = sorted(left)
                    self.record[name]["notes"].append(there.software_only)
                if not mon.events:
                    self.record[name].update(status="unavailable",
                                             errors=[f"none of the events can be counted there: {', '.join(left)}"])
                    warn(f"monitor {name} not run: none of its events can be counted there ({there.software_only})")
                    continue
            if isinstance(mon, PerfProfile):
                if options.event in ("auto", "cycles") and there.hardware:
                    mon.event = "cycles"
                elif options.event == "cycles":
                    self.record[name]["unsupported"] = [f"cycles (sampling cpu-clock instead: {there.software_only})"]
                if "cycles" in there.unsupported:        # found there: said, as for perf-stat
                    self.record[name]["notes"].append(there.software_only)
                self.record[name]["notes"].append(
                    f"perf-profile sampled {mon.event} at {options.freq} Hz there"
                    + (": timer samples, not exact under icount (insn-profile counts)" if exact else ""))
                self.scripts[name] = []
            self.active.append(mon)

    def _perf_there(self, perf_there) -> PerfThere:
        """How perf runs there, asked once; Unavailable when it does not (or this machine's perf is
        what runs there, and it does not run here)."""
        if self.there is None:
            try:
                there = perf_there() if perf_there is not None else None
            except PerflabError as e:       # its machine's perf missing, or the machine unreachable
                raise Unavailable(str(e)) from None
            if there is None:
                raise Unavailable("no perf runs where the processes run")
            if there.perf is None:
                there = replace(there, perf=perf_binary())
            self.there = there
        return self.there

    def __bool__(self) -> bool:
        return bool(self.active)

    def hooks(self, process: int | None = None) -> Hooks:
        asked: dict[str, object] = {}
        for mon in self.active:
            if isinstance(mon, ProcfsMonitor):
                asked[mon.name] = Readings(mon.paths, mon.options.interval)
            elif isinstance(mon, InsnProfile):
                asked[mon.name] = InstructionCounts()
            elif isinstance(mon, PerfStat):
                asked[mon.name] = perf_stat_helper(mon, len(self.pending), self.there)
            elif isinstance(mon, PerfProfile):
                asked[mon.name] = perf_profile_helper(mon, len(self.pending), self.there)
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
                        mon.replay(process, _taken(answer))
                    elif isinstance(answer, InstructionCounts):
                        mon.replay_counts(answer, self.exact)
                    elif isinstance(answer, Helper) and isinstance(mon, PerfStat):
                        self._perf_stat(mon, process, answer)
                    elif isinstance(answer, Helper):
                        self.scripts[mon.name].append(_whole(_output(answer)))
                except Exception as e:
                    self._failed(mon, e)
        out = {}
        for mon in list(self.active):
            try:
                out[mon.name] = self._profile(mon) if isinstance(mon, PerfProfile) else mon.collect()
            except Exception as e:
                self._failed(mon, e)
        for mon in self.active:
            # The window its figures cover, recorded once per run (perflab.monitors.windows).
            self.record[mon.name]["window"] = mon.counted_window
            if isinstance(mon, InsnProfile) and mon.windows:
                self.record[mon.name]["notes"] = [f"functions named by {', '.join(sorted(mon.sources))}"]
                self.record[mon.name]["notes"] += sorted(mon.notes)
                for note in sorted(mon.notes - mon.said):
                    self.warn(f"monitor {mon.name}: {note}")
                mon.said |= mon.notes
        return out

    def _perf_stat(self, mon: PerfStat, process: int | None, helper: Helper) -> None:
        totals, units, rows, unsupported = parse_stat_intervals(_output(helper), self.cpus)
        if not totals and not unsupported:
            # As on the host (PerfStat's PerfFailed): a repetition with no counts fails the monitor, said
            # with perf's own last words there, rather than leaving the run without its figures unsaid.
            said = _last_words(helper)
            raise RuntimeError(f"perf stat wrote no counts there{': ' + said if said else ''}")
        entry = self.record[mon.name]
        entry["unsupported"] = sorted(set(entry["unsupported"]) | unsupported)
        # The counted time: the intervals' running time (perf counted only while enabled).
        mon._parts.append(StatPart(process, rows[-1][0] if rows else 0.0, totals, units, rows))

    def _profile(self, mon: PerfProfile) -> Collected:
        """A repetition's perf script texts reduced as perf-profile reduces them on the host."""
        texts, self.scripts[mon.name] = self.scripts[mon.name], []
        if not texts:
            return Collected()
        profile = reduce_profile(parse_perf_script("\n\n".join(texts)))
        samples = profile_samples(profile, mon.options)
        samples.append(Sample("perf-profile.samples", float(profile.samples), "", INFORMATIONAL))
        return Collected(samples=samples, series=[(None, 0.0, symbol_row(profile, mon.options))])

    def close(self) -> None:
        self.active = []


def _at(directory: str, name: str) -> str:
    return f"{directory}/{name}" if directory else name


def perf_stat_helper(mon: PerfStat, n: int, there: PerfThere) -> Helper:
    """perf-stat's `perf stat -a -I` (its argv as on this machine: PerfStat.perf_argv, with the perf
    there), as the agent starts it where the processes run (docs/vm.md, docs/lab.md)."""
    ctl, ack = _at(there.fifos, f"stat-{n}.ctl"), _at(there.fifos, f"stat-{n}.ack")
    out = _at(there.files, f"perflab-stat-{n}.txt")
    return Helper(controlled(mon.perf_argv(Path(out), there.perf), ctl, ack), there.root, ctl, ack, out)


def perf_profile_helper(mon: PerfProfile, n: int, there: PerfThere) -> Helper:
    """perf-profile's `perf record -a -g` (PerfProfile.perf_argv) where the processes run, then
    `perf script` there: that machine's /proc/kallsyms and binaries name its samples; the
    recording is removed there once read."""
    ctl, ack = _at(there.fifos, f"profile-{n}.ctl"), _at(there.fifos, f"profile-{n}.ack")
    data, out = _at(there.files, f"perflab-profile-{n}.data"), _at(there.files, f"perflab-profile-{n}.txt")
    script = shlex.join(script_argv(there.perf, data))
    # Identical stacks summed there (FOLD_AWK): what comes back goes with the distinct stacks; where
    # there is no awk, the text as perf script wrote it.
    fold = f" | awk {shlex.quote(FOLD_AWK)}" if there.fold else ""
    post = ["/bin/sh", "-c", f"{script}{fold} > {shlex.quote(out)}; rm -f {shlex.quote(data)}"]
    return Helper(controlled(mon.perf_argv(Path(data), there.perf), ctl, ack), there.root, ctl, ack, out, post)


# The agent reads a helper's file back up to this many bytes (agent.c READ_LIMIT) and cuts it there
# without a word: a profile of the samples before the cut (unfolded text: the run's first seconds;
# folded: stacks in awk's hash order) would read as the whole run's.
AGENT_READ_LIMIT = 64 << 20


def _whole(text: str) -> str:
    """perf script's text as it came back, refused when the agent cut it (AGENT_READ_LIMIT)."""
    if len(text) >= AGENT_READ_LIMIT // 4 and len(text.encode(errors="surrogateescape")) >= AGENT_READ_LIMIT:
        raise RuntimeError(f"perf script's text there reached the {AGENT_READ_LIMIT >> 20} MiB the agent reads back "
                           "and was cut: a profile of part of the run is not the run's (lower the monitor's freq, "
                           "or shorten the run)")
    return text


# What the agent sends back of one run's readings and helpers' files at most (agent.c READINGS_LIMIT).
AGENT_READINGS_LIMIT = 128 << 20


def _taken(readings: Readings) -> list:
    """A monitor's readings, refused when the agent left some out: its figures would cover part of the run."""
    if readings.left_out:
        raise RuntimeError(f"readings of {', '.join(sorted(readings.left_out))} there were not sent back: with the "
                           f"run's other readings they passed the {AGENT_READINGS_LIMIT >> 20} MiB the agent sends "
                           "of one run (a longer interval, fewer monitors, or a shorter run)")
    return readings.taken


def _output(helper: Helper) -> str:
    """What a helper wrote; an error with its own words when it wrote nothing."""
    if helper.left_out:
        raise RuntimeError(f"perf's output there was not sent back: with the run's other readings it passed the "
                           f"{AGENT_READINGS_LIMIT >> 20} MiB the agent sends of one run (lower the monitor's freq, "
                           "monitor fewer things at once, or shorten the run)")
    if not helper.output.strip():
        raise RuntimeError(f"perf did not run there: {_last_words(helper) or 'no output'}")
    return helper.output


def _last_words(helper: Helper) -> str:
    """The last lines a helper wrote on its stderr there, as one line."""
    return " | ".join(line.strip() for line in helper.stderr.splitlines()[-3:] if line.strip())
