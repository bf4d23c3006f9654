"""perf on an SSH machine (HOST_TOOLS there): the machine's own perf, found on its PATH.

perf-stat and perf-profile run beside a job's processes on the machine, as in a guest: its
agent starts perf before the benchmark, enables and disables it through perf's control FIFO
and sends its output back (perflab.monitors.guest; execution/vm/c/agent.c), everything in the
run directory, which goes with the session. What this module adds is the machine's perf,
asked once per machine and command through the shared connection, before the job runs: where
`command -v perf` finds it on the login's PATH, that it runs (Debian's /usr/bin/perf is a
wrapper that fails without the package for the running kernel), that the login may count
system-wide (`perf stat -a`), and which hardware counters the machine has (a VM often has
none: software events only, said with the run). docs/lab.md, "What a machine needs for perf".
"""

from __future__ import annotations

import shlex
import threading

from perflab.core.errors import PerflabError
from perflab.execution.targets import PerfThere
from perflab.execution.targets.ssh_machine import Connection, Machine

SEP = ";"                                  # perf stat -x: its field separator
HARDWARE = ("cycles", "instructions")      # the hardware events every report shows (perf-stat's defaults)
# Run by the login's shell through /bin/sh: key=value lines, one stat= line per line perf wrote.
PROBE = "\n".join([
    'p=$(command -v perf) || { echo "path=$PATH"; exit 0; }',
    'case $p in /*) ;; *) echo "path=$PATH"; exit 0 ;; esac',     # an alias or a function: no program
    'echo "perf=$p"',
    'echo "paranoid=$(cat /proc/sys/kernel/perf_event_paranoid 2>/dev/null)"',
    'echo "version=$("$p" --version 2>&1 | head -n 1)"',
    'echo "awk=$(command -v awk)"',
    f"o=$(\"$p\" stat -a -x '{SEP}' -e cpu-clock " + " ".join(f"-e {e}" for e in HARDWARE)
    + " -- true 2>&1 >/dev/null); echo \"status=$?\"",
    "printf '%s\\n' \"$o\" | sed 's/^/stat=/'",
])
REFUSED = ("perf_event_paranoid", "Access to performance monitoring", "Permission denied", "Operation not permitted")

# A machine's perf as found (once per process and kernel: the one it runs, "", or a kernel under
# test kexec'ed there, whose perf may differ); a refusal is not kept: a lab worker lives for days,
# and perf installed on its machine meanwhile is found by the next job that asks.
_FOUND: dict[tuple[Machine, str], PerfThere] = {}
_LOCK = threading.Lock()


def perf_of(machine: Machine, connection: Connection, kernel: str = "") -> PerfThere:
    """How perf runs on `machine` on `kernel` ("" its own; else the label of the kernel under test,
    asked once it runs it) (asked once per process): PerflabError in one line naming the machine
    when it has none, it does not run or may not count system-wide (asked again next time);
    SshDown when the machine does not answer (the run then fails as target down)."""
    with _LOCK:
        found = _FOUND.get((machine, kernel))
    if found is None:
        found = _found(machine, connection.run("exec /bin/sh -c " + shlex.quote(PROBE)))
        if isinstance(found, PerflabError):
            raise found
        with _LOCK:
            _FOUND[(machine, kernel)] = found
    return found


def found(machine: Machine, kernel: str) -> PerfThere | None:
    """What perf_of found on `machine` running `kernel`, if it was asked there."""
    with _LOCK:
        return _FOUND.get((machine, kernel))


def _found(machine: Machine, text: str) -> PerfThere | PerflabError:
    said: dict[str, str] = {}
    stat: list[str] = []
    for line in text.splitlines():
        key, _, value = line.partition("=")
        if key == "stat":
            stat.append(value)
        elif key:
            said[key] = value.strip()
    on = machine.on
    perf = said.get("perf")
    if not perf:
        return PerflabError(f"{on} has no perf on its PATH: install linux-perf there (perf for its running kernel); "
                            "perf-stat and perf-profile run the machine's own perf, beside its processes (its PATH: "
                            f"{said.get('path') or 'empty'})")
    version = said.get("version", "")
    if not version.startswith("perf version"):
        return PerflabError(f"the perf of {on} ({perf}) does not run there ({version or 'no output'}): install "
                            "linux-perf there for its running kernel")
    words = [w.strip() for w in stat if w.strip()]
    if said.get("status") != "0":
        if any(r in w for w in words for r in REFUSED):
            return PerflabError(
                f"the perf of {on} may not count system-wide there (perf -a): its kernel.perf_event_paranoid is "
                f"{said.get('paranoid') or 'unreadable'}; it needs 0 or lower there (sysctl -w "
                "kernel.perf_event_paranoid=0), or a login as root (or a perf with CAP_PERFMON)")
        return PerflabError(f"perf stat -a fails on {on}: {' | '.join(words[:3]) or 'exit ' + said.get('status', '?')}")
    lacking = tuple(e for e in HARDWARE if any(w.split(SEP)[0] == "<not supported>" and len(w.split(SEP)) > 2
                                               and w.split(SEP)[2].split(":")[0] == e for w in words))
    return PerfThere(perf, said=f"the perf of {on} ({perf}, {version}), run there in the run directory",
                     hardware="cycles" not in lacking,
                     software_only=f"no hardware counters on {on}: software events only",
                     unsupported=lacking, fold=bool(said.get("awk")))


def forget() -> None:
    """What was found, forgotten (tests; a machine whose perf was installed meanwhile)."""
    with _LOCK:
        _FOUND.clear()
