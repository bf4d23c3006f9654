"""Monitors that read /proc (and debugfs) themselves: no process of their own.

Each reads one file into {field: number} at the start and end of every timed
part and every `interval` seconds between (the sampler thread); perflab.monitors.base.Snapshots
reduces the readings as LKP does: counters last minus first, gauges the mean.
Metric names follow LKP (`proc-vmstat.pgfault`, `meminfo.Dirty`, `vmstat.cpu.sy`); docs/monitors.md
lists them with their reductions. The cpu shares are tick-sampled (`tick_sampled`).
"""

from __future__ import annotations

import fnmatch, math, os, re, subprocess
from pathlib import Path

from pydantic import Field

from perflab.core.model import Sample
from perflab.execution.targets import FILE_READINGS
from perflab.monitors.base import Collected, Monitor, MonitorOptions, Snapshots, Unavailable, informational

PAGE_KIB = os.sysconf("SC_PAGE_SIZE") // 1024
USER_HZ = os.sysconf("SC_CLK_TCK")
CPU_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal", "guest", "guest_nice")


def _read(path: str) -> str:
    with open(path) as f:
        return f.read()


class ProcfsMonitor(Monitor):
    """A monitor of /proc files: readings at begin, every interval, and end. On this machine it
    reads them itself (`read`); in a VM guest the guest's agent reads `paths` and the texts are
    parsed here (`parse`, `replay`)."""

    path: str = ""
    paths: tuple[str, ...] = ()      # what a guest reads for it
    needs = frozenset({FILE_READINGS})     # read where the process runs: this machine, a guest, an SSH machine

    def __init__(self, options: MonitorOptions):
        super().__init__(options)
        self.snaps = Snapshots()

    def check(self) -> None:
        try:
            self.read()
        except OSError as e:
            raise Unavailable(f"cannot read {self.path}: {e.strerror}") from None

    def read(self) -> dict[str, float]:
        raise NotImplementedError

    def parse(self, texts: dict[str, str]) -> dict[str, float]:
        """A reading from the files' texts (path -> text), as a guest's agent read them."""
        raise NotImplementedError

    def replay(self, process: int | None, readings: list[tuple[float, dict[str, str]]]) -> None:
        """One timed process's readings, taken where it ran: the first begins the part."""
        for i, (t, texts) in enumerate(readings):
            missing = [p for p in self.paths if not texts.get(p)]
            if missing:
                raise OSError(f"cannot read {', '.join(missing)} in the guest")
            reading = self.parse(texts)
            if i == 0:
                self.snaps.begin(process, t, reading)
            else:
                self.snaps.add(t, reading)

    def is_counter(self, field: str) -> bool:
        return True

    def unit(self, field: str) -> str:
        return ""

    def begin(self, now: float, process: int | None) -> None:
        self.snaps.begin(process, now, self.read())

    def sample(self, now: float) -> None:
        self.snaps.add(now, self.read())

    def end(self, now: float) -> None:
        self.snaps.add(now, self.read())

    def reduce(self) -> list[Sample]:
        """LKP's reduction: counters as the delta and the delta per second, gauges as the mean."""
        seconds = self.snaps.seconds
        out = []
        for k, v in sorted(self.snaps.deltas().items()):
            if self.is_counter(k):
                out.append(informational(f"{self.name}.{k}", v, self.unit(k)))
                if seconds > 0:
                    out.append(informational(f"{self.name}.{k}.per_s", v / seconds, "/s"))
        for k, v in sorted(self.snaps.means().items()):
            if not self.is_counter(k):
                out.append(informational(f"{self.name}.{k}", v, self.unit(k)))
        return out

    def series(self):
        return self.snaps.interval_rows({k for k in self._fields() if self.is_counter(k)})

    def _fields(self) -> set[str]:
        return {k for _, readings in self.snaps.parts for _, r in readings for k in r}

    def collect(self) -> Collected:
        try:
            return Collected(self.reduce(), self.series())
        finally:
            self.snaps.clear()


# -- /proc/stat -------------------------------------------------------------------

def read_proc_stat() -> dict[str, float]:
    return parse_proc_stat(_read("/proc/stat"))


def parse_proc_stat(text: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for line in text.splitlines():
        words = line.split()
        if not words:
            continue
        if words[0] == "cpu":
            for name, v in zip(CPU_FIELDS, words[1:]):
                out[f"cpu.{name}"] = float(v)
        elif words[0] in ("intr", "softirq", "ctxt", "processes", "procs_running", "procs_blocked"):
            out[words[0]] = float(words[1])
    return out


def cpu_percentages(delta: dict[str, float]) -> dict[str, float]:
    """Shares of CPU time in % from deltas of /proc/stat's cpu line (guest time is inside user)."""
    total = sum(delta.get(f"cpu.{f}", 0.0) for f in CPU_FIELDS if not f.startswith("guest"))
    if total <= 0:
        return {}
    return {f: delta.get(f"cpu.{f}", 0.0) * 100.0 / total for f in CPU_FIELDS}


class ProcStat(ProcfsMonitor):
    name = "proc-stat"
    path = "/proc/stat"
    paths = ("/proc/stat",)
    summary = "CPU time shares, interrupts, context switches and forks from /proc/stat"
    records = ("proc-stat.cpu.user|system|idle|iowait|irq|softirq|steal (% of CPU time), proc-stat.ctxt, "
               "proc-stat.intr, proc-stat.softirq, proc-stat.processes (deltas, and .per_s), "
               "proc-stat.procs_running, proc-stat.procs_blocked (means)")
    GAUGES = frozenset({"procs_running", "procs_blocked"})

    def read(self):
        return read_proc_stat()

    def parse(self, texts):
        return parse_proc_stat(texts["/proc/stat"])

    def is_counter(self, field):
        return field not in self.GAUGES

    def reduce(self):
        seconds = self.snaps.seconds
        deltas = self.snaps.deltas()
        out = [informational(f"proc-stat.cpu.{k}", v, "%") for k, v in cpu_percentages(deltas).items()]
        for k in ("ctxt", "intr", "softirq", "processes"):
            if k in deltas:
                out.append(informational(f"proc-stat.{k}", deltas[k]))
                if seconds > 0:
                    out.append(informational(f"proc-stat.{k}.per_s", deltas[k] / seconds, "/s"))
        for k, v in self.snaps.means(self.GAUGES).items():
            out.append(informational(f"proc-stat.{k}", v))
        return out

    def series(self):
        rows = []
        # Per interval: CPU shares, rates and the gauges as read.
        for process, readings in self.snaps.parts:
            t0 = readings[0][0]
            for (ta, a), (tb, b) in zip(readings, readings[1:]):
                span = tb - ta
                if span <= 0:
                    continue
                delta = {k: b[k] - a[k] for k in b if k in a}
                values = {f"cpu.{k}": v for k, v in cpu_percentages(delta).items()}
                values.update({k: delta[k] / span for k in ("ctxt", "intr", "softirq", "processes") if k in delta})
                values.update({k: b[k] for k in self.GAUGES if k in b})
                rows.append((process, round(tb - t0, 6), values))
        return rows


# -- vmstat, computed from /proc as vmstat(8) does -----------------------------------

def read_meminfo() -> dict[str, float]:
    return parse_meminfo(_read("/proc/meminfo"))


def parse_meminfo(text: str) -> dict[str, float]:
    out = {}
    for line in text.splitlines():
        name, _, rest = line.partition(":")
        words = rest.split()
        if words:
            out[name.strip()] = float(words[0])
    return out


def read_proc_vmstat() -> dict[str, float]:
    return parse_proc_vmstat(_read("/proc/vmstat"))


def parse_proc_vmstat(text: str) -> dict[str, float]:
    out = {}
    for line in text.splitlines():
        words = line.split()
        if len(words) == 2:
            out[words[0]] = float(words[1])
    return out


class Vmstat(ProcfsMonitor):
    """vmstat(8)'s columns, computed from /proc/stat, /proc/meminfo and /proc/vmstat without running vmstat."""

    name = "vmstat"
    path = "/proc/stat, /proc/meminfo, /proc/vmstat"
    paths = ("/proc/stat", "/proc/meminfo", "/proc/vmstat")
    summary = "vmstat(8)'s columns (procs, memory, swap, io, system, cpu), read from /proc"
    records = ("vmstat.procs.r|b, vmstat.memory.swpd|free|buff|cache (KiB), vmstat.swap.si|so, vmstat.io.bi|bo "
               "(KiB/s), vmstat.system.in|cs (/s), vmstat.cpu.us|sy|id|wa|st (%); all means over the timed part")
    VMSTAT_KEYS = ("pswpin", "pswpout", "pgpgin", "pgpgout")
    MEM_KEYS = ("MemFree", "Buffers", "Cached", "SReclaimable", "SwapTotal", "SwapFree")
    COUNTERS = frozenset({*(f"cpu.{f}" for f in CPU_FIELDS), "intr", "ctxt", *VMSTAT_KEYS})

    def read(self):
        return self._combined(read_proc_stat(), read_meminfo(), read_proc_vmstat())

    def parse(self, texts):
        return self._combined(parse_proc_stat(texts["/proc/stat"]), parse_meminfo(texts["/proc/meminfo"]),
                              parse_proc_vmstat(texts["/proc/vmstat"]))

    def _combined(self, stat, mem, vm):
        out = {k: v for k, v in stat.items() if k in self.COUNTERS or k in ("procs_running", "procs_blocked")}
        out.update({f"mem.{k}": mem.get(k, 0.0) for k in self.MEM_KEYS})
        out.update({k: vm.get(k, 0.0) for k in self.VMSTAT_KEYS})
        return out

    @classmethod
    def _levels(cls, r: dict[str, float]) -> dict[str, float]:
        return {
            "procs.r": r["procs_running"], "procs.b": r["procs_blocked"],
            "memory.swpd": r["mem.SwapTotal"] - r["mem.SwapFree"], "memory.free": r["mem.MemFree"],
            "memory.buff": r["mem.Buffers"], "memory.cache": r["mem.Cached"] + r["mem.SReclaimable"],
        }

    @staticmethod
    def _rates(delta: dict[str, float], seconds: float) -> dict[str, float]:
        shares = cpu_percentages(delta)
        out = {
            "swap.si": delta["pswpin"] * PAGE_KIB / seconds, "swap.so": delta["pswpout"] * PAGE_KIB / seconds,
            "io.bi": delta["pgpgin"] / seconds, "io.bo": delta["pgpgout"] / seconds,
            "system.in": delta["intr"] / seconds, "system.cs": delta["ctxt"] / seconds,
        }
        if shares:
            out.update({
                "cpu.us": shares["user"] + shares["nice"],
                "cpu.sy": shares["system"] + shares["irq"] + shares["softirq"],
                "cpu.id": shares["idle"], "cpu.wa": shares["iowait"], "cpu.st": shares["steal"],
            })
        return out

    UNITS = {"memory": "KiB", "swap": "KiB/s", "io": "KiB/s", "system": "/s", "cpu": "%"}

    def reduce(self):
        seconds = self.snaps.seconds
        levels: dict[str, list[float]] = {}
        for _, readings in self.snaps.parts:
            for _, r in readings:
                for k, v in self._levels(r).items():
                    levels.setdefault(k, []).append(v)
        values = {k: sum(v) / len(v) for k, v in levels.items()}
        if seconds > 0:
            # Over the whole timed part: the time-weighted mean of the per-interval figures.
            values.update(self._rates(self.snaps.deltas(), seconds))
        return [informational(f"vmstat.{k}", v, self.UNITS.get(k.split(".")[0], "")) for k, v in values.items()]

    def series(self):
        rows = []
        for process, readings in self.snaps.parts:
            t0 = readings[0][0]
            for (ta, a), (tb, b) in zip(readings, readings[1:]):
                if tb - ta <= 0:
                    continue
                values = self._levels(b)
                values.update(self._rates({k: b[k] - a[k] for k in self.COUNTERS}, tb - ta))
                rows.append((process, round(tb - t0, 6), values))
        return rows


# -- /proc/vmstat, /proc/meminfo ------------------------------------------------------

# /proc/vmstat's nr_* fields are levels (pages now) except these running totals.
VMSTAT_NR_COUNTERS = frozenset({"nr_dirtied", "nr_written", "nr_foll_pin_acquired", "nr_foll_pin_released",
                                "nr_unaccepted_accepted"})
VMSTAT_LEVELS = frozenset({"workingset_nodes"})


class ProcVmstat(ProcfsMonitor):
    name = "proc-vmstat"
    path = "/proc/vmstat"
    paths = ("/proc/vmstat",)
    summary = "every counter and level of /proc/vmstat (page faults, allocation, reclaim, THP, NUMA ...)"
    records = ("event counters as the delta over the timed part (proc-vmstat.pgfault) and per second "
               "(proc-vmstat.pgfault.per_s); nr_* levels as their mean (proc-vmstat.nr_dirty, pages)")

    def read(self):
        return read_proc_vmstat()

    def parse(self, texts):
        return parse_proc_vmstat(texts["/proc/vmstat"])

    def is_counter(self, field):
        if field in VMSTAT_LEVELS:
            return False
        return not field.startswith("nr_") or field in VMSTAT_NR_COUNTERS

    def unit(self, field):
        return "" if self.is_counter(field) else "pages"


class Meminfo(ProcfsMonitor):
    name = "meminfo"
    path = "/proc/meminfo"
    paths = ("/proc/meminfo",)
    summary = "every field of /proc/meminfo"
    records = "each field's mean over the timed part (meminfo.Dirty, meminfo.MemFree, meminfo.AnonHugePages; KiB)"

    def read(self):
        return read_meminfo()

    def parse(self, texts):
        return parse_meminfo(texts["/proc/meminfo"])

    def is_counter(self, field):
        return False

    def unit(self, field):
        return "" if field.startswith("HugePages_") else "KiB"


# -- /proc/interrupts, /proc/softirqs ---------------------------------------------------

class PerCpuOptions(MonitorOptions):
    per_cpu: bool = Field(False, description="also record each CPU's count (interrupts.CPU0.LOC:...)")


def _irq_name(label: str, rest: list[str]) -> str:
    """LKP's interrupt names: `CAL:Function_call_interrupts`, `24:IO-APIC.5-edge.ACPI:Ged`."""
    if label.isdigit():
        return f"{label}:" + ".".join(rest)
    return f"{label}:" + "_".join(rest) if rest else label


def read_interrupts(per_cpu: bool) -> dict[str, float]:
    return parse_interrupts(_read("/proc/interrupts"), per_cpu)


def parse_interrupts(text: str, per_cpu: bool) -> dict[str, float]:
    lines = text.splitlines()
    cpus = lines[0].split()
    out: dict[str, float] = {}
    for line in lines[1:]:
        label, _, rest = line.partition(":")
        label = label.strip()
        words = rest.split()
        counts = []
        for w in words[:len(cpus)]:
            if not w.isdigit():
                break
            counts.append(float(w))
        name = _irq_name(label, words[len(counts):])
        out[name] = sum(counts)
        if per_cpu:
            for cpu, c in zip(cpus, counts):
                out[f"{cpu}.{name}"] = c
    return out


class Interrupts(ProcfsMonitor):
    name = "interrupts"
    path = "/proc/interrupts"
    paths = ("/proc/interrupts",)
    Options = PerCpuOptions
    summary = "interrupts by source from /proc/interrupts"
    records = ("each source's count over the timed part (interrupts.CAL:Function_call_interrupts, "
               "interrupts.LOC:Local_timer_interrupts) and per second (.per_s); per CPU with per_cpu: true")

    def read(self):
        return read_interrupts(self.options.per_cpu)

    def parse(self, texts):
        return parse_interrupts(texts["/proc/interrupts"], self.options.per_cpu)


def read_softirqs(per_cpu: bool) -> dict[str, float]:
    return parse_softirqs(_read("/proc/softirqs"), per_cpu)


def parse_softirqs(text: str, per_cpu: bool) -> dict[str, float]:
    lines = text.splitlines()
    cpus = lines[0].split()
    out: dict[str, float] = {}
    for line in lines[1:]:
        label, _, rest = line.partition(":")
        counts = [float(w) for w in rest.split()]
        out[label.strip()] = sum(counts)
        if per_cpu:
            for cpu, c in zip(cpus, counts):
                out[f"{cpu}.{label.strip()}"] = c
    return out


class Softirqs(ProcfsMonitor):
    name = "softirqs"
    path = "/proc/softirqs"
    paths = ("/proc/softirqs",)
    Options = PerCpuOptions
    summary = "softirqs by kind from /proc/softirqs"
    records = "each kind's count over the timed part (softirqs.NET_RX, softirqs.RCU, softirqs.SCHED) and .per_s"

    def read(self):
        return read_softirqs(self.options.per_cpu)

    def parse(self, texts):
        return parse_softirqs(texts["/proc/softirqs"], self.options.per_cpu)


# -- /proc/diskstats --------------------------------------------------------------------

DISK_FIELDS = ("rd_ios", "rd_merges", "rd_sectors", "rd_ticks", "wr_ios", "wr_merges", "wr_sectors", "wr_ticks",
               "in_flight", "io_ticks", "time_in_queue", "dc_ios", "dc_merges", "dc_sectors", "dc_ticks",
               "fl_ios", "fl_ticks")


GUEST_PARTITION = re.compile(r"^(vd|sd|hd|xvd)[a-z]+\d+$|^nvme\d+n\d+p\d+$")


class DiskOptions(MonitorOptions):
    devices: list[str] = Field(default_factory=lambda: ["*"],
                               description="device name globs (default: every disk but loop, ram and zram devices)")


class Diskstats(ProcfsMonitor):
    name = "diskstats"
    path = "/proc/diskstats"
    paths = ("/proc/diskstats",)
    Options = DiskOptions
    summary = "block device I/O from /proc/diskstats (whole disks)"
    records = ("per device: diskstats.vda.rd_ios|wr_ios|rd_sectors|wr_sectors|io_ticks ... deltas and .per_s, "
               "diskstats.vda.in_flight mean, diskstats.vda.util (% of time busy)")

    def _wanted(self, dev: str, here: bool = True) -> bool:
        globs = self.options.devices
        if globs == ["*"]:
            if dev.startswith(("loop", "ram", "zram")):
                return False
            # Whole disks: this machine's /sys says; a guest's virtio and SCSI partitions by name.
            return Path(f"/sys/block/{dev}").exists() if here else not GUEST_PARTITION.match(dev)
        return any(fnmatch.fnmatchcase(dev, g) for g in globs)

    def read(self):
        return self._disks(_read("/proc/diskstats"), True)

    def parse(self, texts):
        return self._disks(texts["/proc/diskstats"], False)

    def _disks(self, text: str, here: bool):
        out = {}
        for line in text.splitlines():
            words = line.split()
            if len(words) < 14 or not self._wanted(words[2], here):
                continue
            for name, v in zip(DISK_FIELDS, words[3:]):
                out[f"{words[2]}.{name}"] = float(v)
        return out

    def is_counter(self, field):
        return not field.endswith(".in_flight")

    def reduce(self):
        out = super().reduce()
        seconds = self.snaps.seconds
        if seconds > 0:
            for k, v in self.snaps.deltas().items():
                if k.endswith(".io_ticks"):
                    out.append(informational(f"diskstats.{k.removesuffix('.io_ticks')}.util",
                                             min(100.0, v / 10.0 / seconds), "%"))
        return out


# -- run-queue lengths from the scheduler's debug file -----------------------------------------

SCHED_DEBUG_PATHS = ("/sys/kernel/debug/sched/debug", "/proc/sched_debug")
SCHED_CPU_FIELDS = ("nr_running", "nr_uninterruptible")
SCHED_CFS_FIELDS = ("h_nr_queued", "h_nr_running", "h_nr_runnable", "load_avg", "runnable_avg", "util_avg")
_CPU_HEAD = re.compile(r"^cpu#(\d+)")
_CFS_ROOT = re.compile(r"^cfs_rq\[(\d+)\]:/$")
_FIELD = re.compile(r"^\s+\.([\w>.-]+)\s*:\s*(-?[\d.]+)")


def parse_sched_debug(text: str) -> dict[str, float]:
    """Per CPU: `cpu.nr_running` and the root cfs_rq's queue and load figures, as 'cpu.FIELD.N'."""
    out: dict[str, float] = {}
    section, cpu = None, None
    for line in text.splitlines():
        if not line.strip():
            continue
        if not line.startswith(" "):
            m = _CPU_HEAD.match(line)
            if m:
                section, cpu = "cpu", m.group(1)
                continue
            m = _CFS_ROOT.match(line.strip())
            section, cpu = ("cfs_rq:/", m.group(1)) if m else (None, None)
            continue
        if section is None:
            continue
        m = _FIELD.match(line)
        if not m:
            continue
        field = m.group(1)
        if (section == "cpu" and field in SCHED_CPU_FIELDS) or (section == "cfs_rq:/" and field in SCHED_CFS_FIELDS):
            out[f"{section}.{field}.{cpu}"] = float(m.group(2))
    return out


class SchedDebug(ProcfsMonitor):
    """LKP's sched_debug: per-CPU run-queue lengths, reduced across CPUs (avg, max, min, stddev)."""

    name = "sched_debug"
    path = SCHED_DEBUG_PATHS[0]
    needs = Monitor.needs     # this machine's: a guest has no debugfs mounted
    summary = "run-queue lengths per CPU from the scheduler's debug file (debugfs sched/debug)"
    records = ("sched_debug.cpu.nr_running.avg|max|min|stddev across CPUs (mean over the timed part), "
               "sched_debug.cfs_rq:/.h_nr_queued|load_avg|runnable_avg|util_avg.avg|max|min|stddev")

    def check(self) -> None:
        self.file = next((p for p in SCHED_DEBUG_PATHS if os.path.exists(p)), None)
        if self.file is None and os.geteuid() == 0 and os.path.isdir("/sys/kernel/debug") \
                and not os.listdir("/sys/kernel/debug"):
            # As LKP does: the scheduler's debug file lives on debugfs; mount it where it belongs.
            done = subprocess.run(["mount", "-t", "debugfs", "none", "/sys/kernel/debug"], capture_output=True)
            if done.returncode == 0:
                self.notes.append("mounted debugfs on /sys/kernel/debug")
            self.file = next((p for p in SCHED_DEBUG_PATHS if os.path.exists(p)), None)
        if self.file is None:
            raise Unavailable("no scheduler debug file (needs CONFIG_SCHED_DEBUG and debugfs: "
                              "mount -t debugfs none /sys/kernel/debug, as root)")
        try:
            parsed = self.read()
        except OSError as e:
            raise Unavailable(f"cannot read {self.file}: {e.strerror} (run as root)") from None
        if not parsed:
            raise Unavailable(f"{self.file}: no per-CPU run-queue figures found in it")

    def read(self):
        return parse_sched_debug(_read(self.file))

    def is_counter(self, field):
        return False

    @staticmethod
    def _across_cpus(reading: dict[str, float]) -> dict[str, float]:
        by_field: dict[str, list[float]] = {}
        for k, v in reading.items():
            by_field.setdefault(k.rsplit(".", 1)[0], []).append(v)
        out = {}
        for f, vs in by_field.items():
            mean = sum(vs) / len(vs)
            out[f"{f}.avg"] = mean
            out[f"{f}.max"] = max(vs)
            out[f"{f}.min"] = min(vs)
            out[f"{f}.stddev"] = math.sqrt(sum((v - mean) ** 2 for v in vs) / len(vs))
        return out

    def reduce(self):
        sums: dict[str, float] = {}
        n = 0
        for _, readings in self.snaps.parts:
            for _, r in readings:
                n += 1
                for k, v in self._across_cpus(r).items():
                    sums[k] = sums.get(k, 0.0) + v
        return [informational(f"sched_debug.{k}", v / n) for k, v in sorted(sums.items())] if n else []

    def series(self):
        rows = []
        for process, readings in self.snaps.parts:
            t0 = readings[0][0]
            rows += [(process, round(t - t0, 6), self._across_cpus(r)) for t, r in readings[1:]]
        return rows
