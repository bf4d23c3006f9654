"""A job's own keys (runs, warmup, timeout, tag, comment, monitors, kernel, vm, measure, cc),
checked, and `resolve`: the one place an atomic job's parameters are validated."""

from __future__ import annotations

import difflib
import itertools
import re
from dataclasses import replace

from perflab.benchmarks.base import JobError
from perflab.core.errors import PerflabError
from perflab.core.params import job_cpus, parse_scalar
from perflab.core.text import brief as shorten
from perflab.execution import instruments
from perflab.execution.targets import WithTargetKeys
from perflab.jobs.job import MEASURE_KEYS, AtomicJob, instruments_of, target_of

JOB_KEYS = ("benchmark", "runs", "warmup", "timeout", "tag", "comment", "monitors")

# A kernel to boot and run the job in, and its machine (perflab.jobs.guest; docs/vm.md).
GUEST_KEYS = ("kernel", "vm")

# Counting the job's processes under valgrind (docs/instructions.md): perflab.jobs.job.MEASURE_KEYS.
MEASURE_MODES = ("instructions", "cache")

# The compiler of the job's C programs and flags added to theirs (core.cbuild.compiling_with);
# a list is a matrix axis (`cc: [gcc, clang]`), so one job file compares compilers. Stored in
# the atomic job only when set.
BUILD_KEYS = ("cc", "cflags")

# A machine to run on (a registered target's keys: an SSH machine's `on`; docs/lab.md).
# The kernel and vm keys are Qemu's, read through jobs.guest (a matrix axis, normalized) above.
TARGET_KEYS = WithTargetKeys(but=GUEST_KEYS)

NOT_PARAMS = WithTargetKeys(*JOB_KEYS, *GUEST_KEYS, *MEASURE_KEYS, *BUILD_KEYS)


class _Mapping(dict):
    lines: dict

def _line(doc, key) -> str:
    line = getattr(doc, "lines", {}).get(key)
    return f":{line}" if line else ""

def _did_you_mean(word, candidates) -> str:
    """` (did you mean 'x'?)` when a candidate is close to `word` (difflib), else nothing."""
    near = difflib.get_close_matches(str(word), [str(c) for c in candidates], n=1, cutoff=0.6)
    return f" (did you mean {near[0]!r}?)" if near else ""

class JobErrors(JobError):
    """Every problem of one job, each a one-line message naming its file, line, key and value."""

    def __init__(self, problems: list[str]):
        # In the order of the file's lines (a problem without a line, e.g. from --set, first).
        def line_of(problem: str) -> int:
            found = re.match(r"[^ ]*?:(\d+): ", problem)
            return int(found.group(1)) if found else 0

        self.problems = sorted(problems, key=line_of)
        super().__init__("\n".join(self.problems))

def _parse_override(text: str) -> tuple[str, object]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise JobError(f"--set {text!r}: expected KEY=VALUE")
    return key.strip(), parse_scalar(value)

def _plain(value):
    """YAML's mapping subclass -> plain JSON-able values."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value

def resolve(job: AtomicJob | dict, where: str = "") -> AtomicJob:
    """The job with its family and parsed parameters; JobError naming the bad key.

    The one place an atomic job's parameters are validated: a job that already
    carries them is returned as it is.
    """
    if isinstance(job, dict):
        job = AtomicJob.from_dict(job)
    if job.resolved:
        return job
    family = job.family
    if family is None:
        from perflab import benchmarks

        family = benchmarks.family(job.benchmark)
    at = where or job.benchmark
    # A stored job may say anything: its target's keys are checked as a job file's are.
    if job.extra.get("vm"):
        raise JobError(f"{at}: key 'vm' needs a kernel to boot (key 'kernel' or --kernel PATH)")
    for key, value in job.target.toolchain.keys().items():
        if not isinstance(value, str):
            raise JobError(f"{at}: key {key!r} = {shorten(value)}: expected "
                           + ("a compiler command (gcc, clang)" if key == "cc" else "compiler flags (-O1 -g)"))
    try:
        cpus = job.target.cpus()
    except PerflabError as e:
        raise JobError(f"{at}: {e}") from None
    with job_cpus(cpus):      # shares of the CPUs are a guest's vCPUs
        parsed = family.parse_params(job.params or {}, where)
    if job.valgrind is not None:
        check_measure({k: getattr(job.valgrind, a) for k, a in zip(MEASURE_KEYS, ("mode", "children", "function"))},
                      where or job.benchmark)
    try:
        # What watches the job must be able to run where it runs (the one place that says so).
        instruments.check(job.watching, job.target, where or job.benchmark)
    except PerflabError as e:
        raise JobError(str(e)) from None
    return replace(job, family=family, parsed=parsed)

def check_measure(keys: dict, where: str, doc: dict | None = None) -> dict:
    """The measure keys of a job, checked: JobError naming the key (and its line in `doc`) at fault."""
    def fail(key: str, message: str):
        raise JobError(f"{where}{_line(doc, key)}: key {key!r} = {keys.get(key)!r}: {message}")

    measure = keys.get("measure")
    if measure is not None and measure not in MEASURE_MODES:
        fail("measure", f"expected one of {', '.join(MEASURE_MODES)}")
    children, function = keys.get("measure_children", False), keys.get("measure_function")
    if not isinstance(children, bool):
        fail("measure_children", "expected true or false")
    if function is not None and not (isinstance(function, str) and function.strip() and function == function.strip()
                                     and "\n" not in function and not function.startswith("-")):
        fail("measure_function", "expected a function name (valgrind's --toggle-collect pattern, * and ? allowed)")
    for key in ("measure_children", "measure_function"):
        if keys.get(key) and measure is None:
            fail(key, "needs measure: instructions or measure: cache")
    return {k: keys[k] for k in MEASURE_KEYS if keys.get(k) not in (None, False)}

def check_compilers(jobs: list[AtomicJob], where: str = "") -> None:
    """Every compiler the jobs name (`cc:`) is installed: one line naming its package otherwise.

    Checked where the jobs are to run here, before anything is built or stored; a job file
    itself may name a compiler this machine lacks (split it, or send it to a lab box)."""
    from perflab.core import cbuild

    at = f"{where}: " if where else ""
    for cc in dict.fromkeys(job.target.toolchain.cc for job in jobs if job.target.toolchain.cc):
        try:
            cbuild.compiler(cc)
        except cbuild.BuildError as e:
            raise JobError(f"{at}key 'cc' = {cc!r}: {e.detail}") from None
    for cflags in dict.fromkeys(job.target.toolchain.cflags for job in jobs if job.target.toolchain.cflags):
        try:
            cbuild.split_flags(cflags)
        except cbuild.BuildError as e:
            raise JobError(f"{at}key 'cflags': {e.detail}") from None

def _job_keys(doc: dict, name: str, where, problems: list[str], source: str) -> dict:
    """The job's own keys (runs, warmup, timeout, tag, comment, monitors, kernel, vm), checked."""
    job = {"benchmark": name, "runs": doc.get("runs"), "warmup": doc.get("warmup", 0),
           "timeout": doc.get("timeout"), "tag": doc.get("tag"), "comment": doc.get("comment"),
           "monitors": doc.get("monitors") or {}}
    for key, check in (("runs", lambda v: v is None or (isinstance(v, int) and not isinstance(v, bool) and v >= 1)),
                       ("warmup", lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0),
                       ("timeout", lambda v: v is None or (isinstance(v, (int, float)) and not isinstance(v, bool)
                                                            and 0 < v < float("inf")))):
        if not check(job[key]):
            want = {"runs": "an integer >= 1", "warmup": "an integer >= 0", "timeout": "a number of seconds > 0"}[key]
            problems.append(f"{where(key)}: key {key!r} = {shorten(job[key])}: expected {want}")
    for key in ("tag", "comment"):
        if isinstance(job[key], (list, dict, bool)):    # a number is fine as text (tag: 2024)
            problems.append(f"{where(key)}: key {key!r} = {shorten(job[key])}: expected a string")
            job[key] = None
        if job[key] is not None and not isinstance(job[key], str):
            job[key] = str(job[key])
    from perflab import monitors

    try:
        job["monitors"] = monitors.validate(job["monitors"])
    except monitors.MonitorError as e:
        problems.append(f"{where('monitors')}: key 'monitors': {e}")
        job["monitors"] = {}
    placed = any(doc.get(k) is not None for k in TARGET_KEYS)
    if (doc.get("kernel") is not None or doc.get("vm")) and not placed:
        from perflab.jobs import guest

        # A list of kernels is an axis of the matrix, as a list of compilers is (perflab.jobs.matrix).
        written = _plain(doc.get("kernel"))
        many = isinstance(written, list)
        if many and not written:
            problems.append(f"{where('kernel')}: key 'kernel': an empty list gives no job")
        stored = []
        expanded = [v for one in (written if many else [written]) for v in guest.variants(one)]
        many = many or len(expanded) > 1
        for one in expanded:
            try:
                kernel, vm = guest.normalize(name, one, _plain(doc.get("vm")),
                                             where("kernel" if "kernel" in doc else "vm"), job["monitors"])
                stored.append(kernel)
                job.update(vm=vm)
            except JobError as e:
                problems.append(str(e))
        if stored:
            job["kernel"] = stored if many else stored[0]
    for key in TARGET_KEYS:
        if doc.get(key) is None:
            continue
        from perflab.core.errors import UsageProblem
        from perflab.execution.targets import check_registered

        try:
            check_registered({key: doc[key]}, lambda k, flag: f"{where(k)}: key {k!r}")
            job[key] = doc[key]
        except UsageProblem as e:
            problems.append(str(e))
    if placed and doc.get("vm"):
        problems.append(f"{where('vm')}: key 'vm' with an SSH machine: the kernel under test runs there on the "
                        "machine itself (kexec); leave 'vm' out")
    if placed and doc.get("kernel") is not None:
        from perflab.core.errors import UsageProblem
        from perflab.execution.targets import registered_kernel

        try:
            job["kernel"] = registered_kernel({k: doc.get(k) for k in TARGET_KEYS}, _plain(doc["kernel"]),
                                              f"{where('kernel')}: key 'kernel'")
        except UsageProblem as e:
            problems.append(str(e))
    try:
        job.update(check_measure({k: doc.get(k) for k in MEASURE_KEYS if k in doc}, source, doc))
        # What watches the job must be able to run where it runs: named at its line.
        instruments.check(instruments_of(job), target_of(job)[0], where("measure"))
    except PerflabError as e:
        problems.append(str(e))
    return job

def _build_axes(doc: dict, where, problems: list[str]) -> list[dict]:
    """The (cc, cflags) points of a job: the product of its `cc:` and `cflags:` values ([{}] without them)."""
    axes = []
    for key in BUILD_KEYS:
        value = doc.get(key)
        if value is None:
            continue
        values = value if isinstance(value, list) else [value]
        if not values:
            problems.append(f"{where(key)}: key {key!r}: an empty list gives no job")
        for v in values:
            if not isinstance(v, str) or (key == "cc" and not v.strip()):
                want = "a compiler command (gcc, clang, gcc-13 -m32)" if key == "cc" else "compiler flags (-O1 -g)"
                problems.append(f"{where(key)}: key {key!r} = {shorten(v)}: expected {want}")
        axes.append([(key, v) for v in values])
    return [dict(combo) for combo in itertools.product(*axes)]

def _guest_cpus(job: dict) -> int | None:
    return target_of(job)[0].cpus()
