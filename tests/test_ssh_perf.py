"""perf-stat and perf-profile on a machine reached over SSH (execution/targets/ssh_perf.py,
monitors/guest.py), against a real sshd on 127.0.0.1 (tests/services.py).

The machine's own perf runs there, beside the job's processes, through perflab's agent: found on
the PATH of the login there (an sshd whose sessions get a PATH without perf is refused in one
line before anything runs), its output read back over the session, its recording named there
by `perf script` and removed with the run directory.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import textwrap
import time
from pathlib import Path

import pytest

from conftest import assert_one_line_error
from perflab.monitors.perf import symbols_from_series
from perflab.monitors.perf.probe import probe_events
from services import SshServer, sshd_named, until
from test_monitors_perf import HOT_C
from perflab.execution.targets.ssh import IDLE_SECONDS
from test_ssh_target import FAR_NAME, _left_behind

needs_perf = pytest.mark.skipif(shutil.which("perf") is None or os.geteuid() != 0,
                                reason="needs perf and root (system-wide counting on the far side)")

# N round trips over two pipes between a parent and its child: each side blocks on its read
# until the other wrote, so the run switches at least once per round trip, however busy the
# machine is (others only add to a system-wide count).
PINGPONG_C = textwrap.dedent("""\
    #include <stdlib.h>
    #include <unistd.h>
    #include <sys/wait.h>
    int main(int argc, char **argv) {
        long n = argc > 1 ? atol(argv[1]) : 1000;
        int a[2], b[2];
        char c = 'x';
        if (pipe(a) || pipe(b)) return 1;
        pid_t pid = fork();
        if (pid < 0) return 1;
        if (pid == 0) {
            for (long i = 0; i < n; i++) if (read(a[0], &c, 1) != 1 || write(b[1], &c, 1) != 1) _exit(1);
            _exit(0);
        }
        for (long i = 0; i < n; i++) if (write(a[1], &c, 1) != 1 || read(b[0], &c, 1) != 1) return 1;
        int status;
        return waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
    }
    """)
ROUND_TRIPS = 20000


@pytest.fixture(scope="module")
def far(tmp_path_factory):
    yield from sshd_named(FAR_NAME)


@pytest.fixture(scope="module")
def programs(tmp_path_factory):
    """The planted workloads, built here: the far side is this machine's file system, so the
    cmd job's command (the machine's own programs, HOST_PROGRAMS) finds them at the same path."""
    d = tmp_path_factory.mktemp("far-programs")
    cc = os.environ.get("CC", "cc")
    for name, source in (("pingpong", PINGPONG_C), ("hot", HOT_C)):
        (d / f"{name}.c").write_text(source)
        subprocess.run([cc, "-O1", "-g", "-fno-omit-frame-pointer", "-o", str(d / name), str(d / f"{name}.c")],
                       check=True)
    return d


def _machine(cli, server: SshServer, tmp_path: Path, more: str = "") -> Path:
    """A configured machine `far` reached through `server` (its settings `more` added), its run
    directories under tmp_path/far-runs."""
    runs = tmp_path / "far-runs"
    runs.mkdir(exist_ok=True)
    config = tmp_path / "perflab.toml"
    config.write_text(f'[machine.far]\nssh = "{SshServer.HOST}"\ntmpdir = "{runs}"\nconnect_timeout = 20\n{more}')
    cli.env.update(PERFLAB_SSH_CONFIG=str(server.config), PERFLAB_CONFIG=str(config))
    return runs


def _monitors(cli) -> dict:
    (text,), = cli.sql("SELECT monitors FROM run")
    return json.loads(text)


def _metrics(cli, prefix: str) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for metric, value in cli.sql("SELECT metric, value FROM sample WHERE metric LIKE ? ORDER BY repetition",
                                 (prefix + "%",)):
        out.setdefault(metric, []).append(value)
    return out


@needs_perf
def test_perf_stat_counts_a_planted_workload_on_the_far_machine(cli, far, programs, tmp_path):
    runs = _machine(cli, far, tmp_path)
    job = cli.tmp / "stat.yaml"
    job.write_text(f"benchmark: cmd\nruns: 2\non: far\ncommand: '{programs / 'pingpong'} {ROUND_TRIPS}'\n"
                   "monitors:\n  perf-stat:\n    events: [context-switches, task-clock, cycles]\n"
                   "    interval: 0.2\n")
    cli("run", job, timeout=300)
    assert cli.sql("SELECT status FROM run") == [("finished",)]
    m = _metrics(cli, "perf-stat.")
    # Counted there, per repetition, while the workload ran: at least a switch per round trip.
    assert len(m.get("perf-stat.context-switches.total", [])) == 2, (m, _monitors(cli), cli("show", "1").stdout)
    assert all(v >= ROUND_TRIPS for v in m["perf-stat.context-switches.total"]), m
    assert all(v > 0 for v in m["perf-stat.task-clock.total"])
    record = _monitors(cli)["perf-stat"]
    assert record["status"] == "ran" and record["where"] == "on the SSH machine far", record
    assert any(n.startswith("the perf of far (") and "run there" in n for n in record["notes"]), record
    # The machine's hardware counters, found there and said: a VM has none (software events only).
    if probe_events(["cycles"])["cycles"] == "ok":
        assert "perf-stat.cycles.total" in m and "cycles" not in record["unsupported"]
    else:
        assert "cycles" in record["unsupported"] and "perf-stat.cycles.total" not in m
        assert "no hardware counters on far: software events only" in record["notes"]
    series = cli.sql("SELECT count(*) FROM monitor_series WHERE monitor = 'perf-stat'")[0][0]
    assert series >= 2
    assert until("nothing of the run left on the machine", lambda: not _left_behind(runs),
                  show=lambda: _left_behind(runs))


@needs_perf
def test_perf_profile_names_a_planted_function_of_a_c_program_run_over_ssh(cli, far, programs, tmp_path):
    runs = _machine(cli, far, tmp_path)
    hot = programs / "hot"
    cli("run", "cmd", "--runs", "1", "--on", "far", "--monitor", "perf-profile", "--", hot, "0.6", timeout=300)
    assert cli.sql("SELECT status FROM run") == [("finished",)]
    selfs = {k.split(".cycles-pp.", 1)[1]: v[0] for k, v in _metrics(cli, "perf-profile.self.").items()}
    (values,), = cli.sql("SELECT \"values\" FROM monitor_series WHERE monitor = 'perf-profile'")
    facts = symbols_from_series(json.loads(values))
    # System-wide, so whatever else runs takes its share: first among the program's own symbols
    # (named by `perf script` there, from the program's own symbol table), and nearly all of them.
    own = {sym: v for sym, v in selfs.items() if facts.get(sym, ("",))[0] == hot.name}
    assert max(own, key=own.get) == "hot_loop_function", (own, facts)
    assert selfs["hot_loop_function"] > 0.5 * sum(own.values())
    assert facts["hot_loop_function"] == ("hot", "[.]")
    record = _monitors(cli)["perf-profile"]
    assert record["status"] == "ran" and record["where"] == "on the SSH machine far", record
    assert any(n.startswith("perf-profile sampled ") and " there" in n for n in record["notes"]), record
    if probe_events(["cycles"])["cycles"] != "ok":
        assert "perf-profile sampled cpu-clock at 999 Hz there" in record["notes"]
        assert "no hardware counters on far: software events only" in record["notes"]
    # Its recording and script went with the run directory.
    assert until("nothing of the run left on the machine", lambda: not _left_behind(runs),
                  show=lambda: _left_behind(runs))


def _perf_there(runs: Path) -> list[str]:
    """perf processes started in a run directory under `runs` (their working directory)."""
    return [s for s in _left_behind(runs) if s.startswith("process") and "cwd" in s and _exe(s).endswith("/perf")]


def _exe(left: str) -> str:
    try:
        return os.readlink(f"/proc/{left.split()[1]}/exe")
    except OSError:
        return ""


@needs_perf
@pytest.mark.parametrize("monitor", ["perf-stat", "perf-profile"])
def test_kill_9_of_perflab_mid_run_leaves_no_perf_on_the_machine(cli, far, programs, tmp_path, monitor):
    runs = _machine(cli, far, tmp_path)
    hot = programs / "hot"
    proc = cli.popen("run", "cmd", "--runs", "3", "--on", "far", "--monitor", monitor, "--", hot, "60")

    def both() -> bool:
        running = any(_exe(f"process {pid}") == str(hot) for pid in filter(str.isdigit, os.listdir("/proc")))
        return running and bool(_perf_there(runs))

    until("the benchmark and its perf running there", both, show=lambda: _left_behind(runs))
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=120)
    # The end of its channel ends the agent, which ends its helpers: no perf outlives the run
    # directory (well within the agent's own watchdog).
    assert until("nothing of the run left on the machine", lambda: not _left_behind(runs),
                  timeout=IDLE_SECONDS * 2 / 3, show=lambda: _left_behind(runs))


@contextlib.contextmanager
def _server_without_perf(tmp_path: Path):
    """An sshd whose sessions get a PATH of every program of this machine's but perf."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for d in ("/usr/local/bin", "/usr/bin", "/bin"):
        for f in Path(d).iterdir() if Path(d).is_dir() else ():
            if f.name != "perf" and not f.name.startswith("perf_") and not (bin_dir / f.name).exists():
                os.symlink(f, bin_dir / f.name)
    server = SshServer()
    server.env["PATH"] = str(bin_dir)
    try:
        server.start()
        yield server
    finally:
        server.destroy()


def test_a_far_machine_without_perf_is_refused_in_one_line_before_the_job_runs(cli, tmp_path):
    with _server_without_perf(tmp_path) as server:
        runs = _machine(cli, server, tmp_path)
        for monitor in ("perf-stat", "perf-profile"):
            proc = cli("run", "cmd", "--on", "far", "--monitor", monitor, "--", "true", check=False, timeout=120)
            assert_one_line_error(proc, "cmd: far has no perf on its PATH: install linux-perf there",
                                  "perf-stat and perf-profile run the machine's own perf", "bin)")
        assert not cli.db.exists() or cli.sql("SELECT count(*) FROM run") == [(0,)]
        assert not list(runs.iterdir())          # nothing was started there


def test_with_a_kernel_under_test_perf_is_not_asked_for_on_the_default_kernel(cli, tmp_path):
    """Issue 46: with --kernel, perf was asked for on the machine's default kernel before the kexec
    (and a perf that fails only on the kernel under test failed the monitor mid-run). Now it is
    asked once the machine runs that kernel (tests/test_kexec_box.py shows it there): a machine
    without perf on its default kernel is not refused for it before the switch. This machine is
    the sshd's, so the switch itself is what refuses, in one line: it never kexecs itself."""
    from perflab.execution.vm import kernel as kernels

    image = kernels.cached(kernels.OTHER_PACKAGE)
    if not image:
        pytest.skip(f"no cached Debian 6.1.0-50 kernel in {kernels.cache_dir()} (tools/fetch_kernel.py --both)")
    with _server_without_perf(tmp_path) as server:
        runs = _machine(cli, server, tmp_path, "kexec = true\n")
        proc = cli("run", "cmd", "--on", "far", "--kernel", image, "--monitor", "perf-stat", "--", "true",
                   check=False, timeout=120)
        assert_one_line_error(proc, "far is the machine perflab runs on")
        assert "no perf" not in proc.stderr
        assert not list(runs.iterdir())


# -- the probe's verdicts, from the probe itself run here (no sshd: the same /bin/sh script) --

def _probe_here(env_path: str, *prefix: str) -> str:
    from perflab.execution.targets.ssh_perf import PROBE

    return subprocess.run([*prefix, "/bin/sh", "-c", PROBE], capture_output=True, text=True, timeout=120,
                          env={"PATH": env_path}).stdout


def _verdict(text: str):
    from perflab.core.errors import PerflabError
    from perflab.execution.targets.ssh_machine import machine_of
    from perflab.execution.targets.ssh_perf import _found

    found = _found(machine_of("ssh://box1"), text)
    return str(found) if isinstance(found, PerflabError) else found


@pytest.mark.skipif(shutil.which("perf") is None or shutil.which("setpriv") is None or os.geteuid() != 0
                    or Path("/proc/sys/kernel/perf_event_paranoid").read_text().strip() in ("-1", "0"),
                    reason="needs perf, setpriv, root and perf_event_paranoid > 0")
def test_a_login_that_may_not_count_system_wide_is_refused_naming_the_setting():
    level = Path("/proc/sys/kernel/perf_event_paranoid").read_text().strip()
    said = _verdict(_probe_here(os.environ["PATH"], "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"))
    assert said.startswith("the perf of ssh://box1 may not count system-wide there (perf -a)"), said
    assert f"kernel.perf_event_paranoid is {level}" in said and "\n" not in said


class _ProbeHere:
    """A machine's connection whose commands (the probe's script) this machine's /bin/sh runs with
    PATH `path` (no SSH)."""

    def __init__(self):
        self.path, self.asked = "", 0

    def run(self, script: str) -> str:
        self.asked += 1
        return subprocess.run(["/bin/sh", "-c", script], capture_output=True, text=True, timeout=120,
                              env={"PATH": self.path}).stdout


def _bin_without_perf(tmp_path: Path) -> Path:
    bin_dir = tmp_path / "bin"                # this machine's programs but perf
    bin_dir.mkdir()
    for d in ("/usr/bin", "/bin"):
        for f in Path(d).iterdir() if Path(d).is_dir() else ():
            if f.name != "perf" and not (bin_dir / f.name).exists():
                os.symlink(f, bin_dir / f.name)
    return bin_dir


@needs_perf
def test_perf_found_on_the_default_kernel_is_not_taken_for_the_kernel_under_tests(tmp_path):
    """Issue 46: perf is asked for on each kernel the machine runs: found on its default kernel, it
    is asked again on a kernel under test (there without perf: refused), and what was found there
    is what the monitors then get (ssh_perf.found)."""
    from perflab.core.errors import PerflabError
    from perflab.execution.targets import ssh_perf
    from perflab.execution.targets.ssh_machine import machine_of

    machine, here = machine_of("ssh://box-kernels"), _ProbeHere()
    ssh_perf.forget()
    try:
        here.path = os.environ["PATH"]                       # its default kernel: perf there
        default = ssh_perf.perf_of(machine, here)
        assert here.asked == 1 and ssh_perf.found(machine, "") is default
        here.path = str(_bin_without_perf(tmp_path))         # the kernel under test: no perf for it
        with pytest.raises(PerflabError, match="has no perf on its PATH"):
            ssh_perf.perf_of(machine, here, "debian:6.1.0-50-amd64")
        assert here.asked == 2 and ssh_perf.found(machine, "debian:6.1.0-50-amd64") is None
    finally:
        ssh_perf.forget()


def test_a_machine_refused_for_want_of_perf_is_asked_again_once_perf_is_there(tmp_path):
    """Review of issue 46: a long-lived lab worker remembered "no perf" for a machine for its
    whole life. The probe (run here, as the machine's /bin/sh would) is asked again after a
    refusal; a perf found is then kept."""
    from perflab.core.errors import PerflabError
    from perflab.execution.targets import ssh_perf
    from perflab.execution.targets.ssh_machine import machine_of

    bin_dir = _bin_without_perf(tmp_path)
    machine, here = machine_of("ssh://box-review"), _ProbeHere()
    ssh_perf.forget()
    try:
        here.path = str(bin_dir)                      # no perf on its PATH
        with pytest.raises(PerflabError, match="has no perf on its PATH"):
            ssh_perf.perf_of(machine, here)
        os.symlink(shutil.which("perf"), bin_dir / "perf")   # perf installed there meanwhile
        found = ssh_perf.perf_of(machine, here)
        assert found.perf == str(bin_dir / "perf") and here.asked == 2
        assert ssh_perf.perf_of(machine, here) is found and here.asked == 2     # a perf found is kept
    finally:
        ssh_perf.forget()


def test_a_perf_that_does_not_run_is_refused_with_its_own_words(tmp_path):
    # Debian's /usr/bin/perf without the linux-perf package of the running kernel says so and fails.
    fake = tmp_path / "perf"
    fake.write_text("#!/bin/sh\necho 'E: linux-perf-9.9 is not installed.' >&2\nexit 1\n")
    fake.chmod(0o755)
    said = _verdict(_probe_here(f"{tmp_path}:/usr/bin:/bin"))
    assert said == (f"the perf of ssh://box1 ({fake}) does not run there (E: linux-perf-9.9 is not installed.): "
                    "install linux-perf there for its running kernel")


def test_a_machine_without_awk_sends_perf_scripts_text_whole(tmp_path):
    """Review of issue 46: perf-profile's epilogue piped perf script into awk (FOLD_AWK) on the
    machine; on one without awk the text came back empty and the run said "perf did not run
    there". The probe asks for awk; without it the text comes back as perf script wrote it."""
    from perflab.monitors import monitor_class, parse_options
    from perflab.monitors.guest import perf_profile_helper
    from perflab.monitors.perf import FOLD_AWK

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "perf"     # a perf that runs and counts cpu-clock (the probe's questions only)
    fake.write_text("#!/bin/sh\ncase $1 in --version) echo 'perf version 9.9';; "
                    "stat) echo '1.00;msec;cpu-clock;1000;100.00;;' >&2;; esac\n")
    fake.chmod(0o755)
    for tool in ("cat", "head", "sed"):
        os.symlink(shutil.which(tool), bin_dir / tool)
    mon = monitor_class("perf-profile")(parse_options("perf-profile", {}))
    without = _verdict(_probe_here(str(bin_dir)))
    assert without.perf == str(fake) and without.fold is False, without
    assert FOLD_AWK not in " ".join(perf_profile_helper(mon, 0, without).post)
    os.symlink(shutil.which("awk"), bin_dir / "awk")
    with_awk = _verdict(_probe_here(str(bin_dir)))
    assert with_awk.fold is True and FOLD_AWK in " ".join(perf_profile_helper(mon, 0, with_awk).post)


def test_a_perf_script_text_the_agent_cut_is_refused_not_reduced():
    """Review of issue 46: the agent reads a helper's file back up to 64 MiB and cuts it there
    without a word; perf script's text of a long profile (unfolded where the machine has no awk)
    was reduced as the whole run's, its shares those of the run's first seconds. Refused now:
    the monitor fails naming the limit, the run goes on without it."""
    from perflab.execution.targets import PerfThere
    from perflab.monitors.guest import GuestMonitorSet

    AGENT_READ_LIMIT = 64 << 20     # agent.c READ_LIMIT
    warned: list[str] = []
    sample = "hot 1 1000\n\tffffffff81000000 do_syscall_64+0x1 ([kernel.kallsyms])\n\t401000 hot_loop_function+0x2 (/x/hot)\n\n"
    for size, whole in ((AGENT_READ_LIMIT // len(sample) // 2, True), (AGENT_READ_LIMIT // len(sample) + 1, False)):
        watching = GuestMonitorSet({"perf-profile": {}}, warn=warned.append,
                                   perf_there=lambda: PerfThere("/usr/bin/perf", said="the perf of box1", fold=False))
        (helper,) = watching.hooks(0).inside
        helper.output = (sample * size)[:AGENT_READ_LIMIT]     # as the agent sends a file it cut
        collected = watching.collect()
        record = watching.record["perf-profile"]
        if whole:
            samples = {s.metric: s.value for s in collected["perf-profile"].samples}
            assert samples["perf-profile.samples"] == size and record["status"] != "failed", record
        else:
            assert "perf-profile" not in collected and record["status"] == "failed", record
            assert any("reached the 64 MiB the agent reads back and was cut" in e for e in record["errors"]), record
            assert any("perf-profile" in w and "64 MiB" in w for w in warned), warned


def test_a_perf_stat_that_wrote_no_counts_there_fails_the_monitor_in_its_own_words():
    """Where the processes run elsewhere (an SSH machine, a guest), a perf stat that wrote no
    counts (its header alone: killed before its first interval) left the run without perf-stat's
    figures and the monitor recorded as run, nothing said. As on the host, the monitor now fails,
    with perf's last words there; one that counted gives its totals."""
    from perflab.execution.targets import PerfThere
    from perflab.monitors.guest import GuestMonitorSet

    header = "# started on Sun Nov 29 10:42:04 2026\n"
    counted = header + ("\n     0.200265173;<not counted>;;context-switches;0;100.00;;"
                        "\n     0.355032286;47;;context-switches;110995206;100.00;423.463;/sec")
    for output, counts in ((header, False), (counted, True)):
        warned: list[str] = []
        watching = GuestMonitorSet({"perf-stat": {"events": ["context-switches"]}}, warn=warned.append,
                                   perf_there=lambda: PerfThere("/usr/bin/perf", said="the perf of box1"))
        (helper,) = watching.hooks(0).inside
        helper.output, helper.stderr = output, "Events disabled\n"
        collected = watching.collect()
        record = watching.record["perf-stat"]
        if counts:
            totals = {s.metric: s.value for s in collected["perf-stat"].samples}
            assert totals["perf-stat.context-switches.total"] == 47 and record["status"] == "ran", record
        else:
            assert "perf-stat" not in collected and record["status"] == "failed", record
            assert record["errors"] == ["RuntimeError: perf stat wrote no counts there: Events disabled"], record
            assert any("perf-stat" in w and "no counts" in w for w in warned), warned


@needs_perf
def test_the_probe_finds_what_this_machine_counts():
    found = _verdict(_probe_here(os.environ["PATH"]))
    assert found.perf == shutil.which("perf") and found.root == ""
    counts_cycles = probe_events(["cycles"])["cycles"] == "ok"
    assert found.hardware == counts_cycles and ("cycles" in found.unsupported) != counts_cycles


# -- the agent itself, on pipes as ssh would give them ------------------------------------------

def _remote_agent(run_dir: Path, agent: Path, idle: int = 3600) -> subprocess.Popen:
    """`agent --remote RUN_DIR IDLE` started here as ssh would start it there: frames on its stdin
    and stdout, the launcher beside it in its run directory."""
    from perflab.execution import executor
    from perflab.execution.vm import initramfs

    run_dir.mkdir()
    shutil.copy(agent, run_dir / "agent")
    shutil.copy(initramfs.build_static("launch", executor.LAUNCHER_DIR), run_dir / "launch")
    return subprocess.Popen([str(run_dir / "agent"), "--remote", str(run_dir), str(idle)], cwd=run_dir,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)


def test_a_perf_output_over_the_agents_readings_limit_is_said_to_be_over_it_not_to_have_not_run(tmp_path):
    """The agent sends back at most READINGS_LIMIT bytes of one run's readings and helpers' files;
    one it leaves out is noted as such, and perflab says the output passed the limit rather than
    "perf did not run there". The agent is built with a 64 KiB limit (-DREADINGS_LIMIT, the one
    constant changed) and the helper writes 96 KiB: the real limit is 128 MiB."""
    from perflab.core.process import ProcessSpec
    from perflab.execution import executor
    from perflab.execution.vm import initramfs
    from perflab.execution.vm.channel import Channel
    from perflab.execution.vm.machine import Guest, VmSpec
    from perflab.monitors import guest as guest_monitors

    small = tmp_path / "agent-small"
    subprocess.run(["cc", "-O2", "-DREADINGS_LIMIT=65536", "-o", str(small),
                    str(initramfs.AGENT_DIR / "agent.c")], check=True)
    run_dir = tmp_path / "run"
    agent = _remote_agent(run_dir, small)
    try:
        channel = Channel(agent.stdin.fileno(), agent.stdout.fileno())
        assert channel.receive(time.monotonic() + 60)[0] == "HELLO"
        guest = Guest(VmSpec(kernel=""), agent, channel, tmp_path, {})
        guest.helper_err = f"{run_dir}/helper.err"
        answer = 'exec 3<>"$0" 4<>"$1"; while read -r w <&3; do echo ack >&4; done'
        helpers = [executor.Helper(["/bin/sh", "-c", answer, f"{n}.ctl", f"{n}.ack"], "", f"{n}.ctl", f"{n}.ack",
                                   f"{n}.out", ["/bin/sh", "-c", f"head -c {size} /dev/zero | tr '\\0' x > {n}.out"])
                   for n, size in (("small", 100), ("big", 96 << 10))]
        result = guest.execute(ProcessSpec(["/bin/true"]), hooks=executor.Hooks(inside=helpers))
        assert result.ok
        assert helpers[0].output == "x" * 100 and not helpers[0].left_out          # within the limit: whole
        assert helpers[1].output == "" and helpers[1].left_out
        with pytest.raises(RuntimeError, match=r"^perf's output there was not sent back: .* passed the 128 MiB"):
            guest_monitors._output(helpers[1])
        # A monitor's readings: 40 KiB at the start fit, the end's do not, and the monitor is told.
        (run_dir / "stat").write_text("y" * (40 << 10))
        readings = executor.Readings((str(run_dir / "stat"),), 0.0)
        assert guest.execute(ProcessSpec(["/bin/true"]), hooks=executor.Hooks(inside=[readings])).ok
        assert len(readings.taken) == 1 and readings.left_out == {str(run_dir / "stat")}
        with pytest.raises(RuntimeError, match=r"^readings of .*/stat there were not sent back: .* 128 MiB"):
            guest_monitors._taken(readings)
    finally:
        agent.stdin.close()
        agent.wait(30)
        agent.stdout.close()


def _gone(pid: int) -> bool:
    """Whether process `pid` has ended (a zombie not yet reaped by its new parent counts as ended)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] == "Z"
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return True


def test_the_agent_outlives_a_helpers_long_epilogue_while_perflab_ticks(tmp_path):
    """`perf script` of a long profile may take longer than the agent's watchdog (IDLE s without a
    byte from perflab): the agent reads perflab's TICKs while it waits for a helper's epilogue, for
    the watchdog counts from the last byte read; and when the channel ends meanwhile it ends the
    epilogue, with what the epilogue started (hang_up).

    Shown without a clock, so that no load can decide it: the agent's stdin is made one page deep
    and perflab writes 64 pages of TICKs while the epilogue waits for all of them to be written.
    An agent that did not read during the epilogue would leave the writer blocked (the backstop
    below fails the test) and the epilogue waiting. The watchdog itself is set far beyond any
    stall, so a starved thread of this test cannot trip it."""
    import fcntl
    import threading

    from perflab.core.process import ProcessSpec
    from perflab.execution import executor
    from perflab.execution.targets.ssh import _SharedChannel
    from perflab.execution.vm import initramfs
    from perflab.execution.vm.machine import Guest, VmSpec

    run_dir = tmp_path / "run"
    agent = _remote_agent(run_dir, initramfs.build_static("agent", initramfs.AGENT_DIR))
    page = fcntl.fcntl(agent.stdin.fileno(), fcntl.F_SETPIPE_SZ, 4096)
    channel = _SharedChannel(agent.stdin.fileno(), agent.stdout.fileno())
    backstop = 120.0      # only a broken agent takes it: a reading one empties the pipe in microseconds
    answer = 'exec 3<>"$0" 4<>"$1"; while read -r w <&3; do echo ack >&4; done'

    def execute(epilogue: str, said: dict) -> threading.Thread:
        helper = executor.Helper(["/bin/sh", "-c", answer, "h.ctl", "h.ack"], "", "h.ctl", "h.ack", "h.out",
                                 ["/bin/sh", "-c", epilogue])

        def run():
            try:
                said["result"] = guest.execute(ProcessSpec(["/bin/true"]), hooks=executor.Hooks(inside=[helper]))
            except Exception as e:        # the second request: its channel ends under it
                said["error"] = e
            said["helper"] = helper

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        return thread

    try:
        assert channel.receive(time.monotonic() + 60)[0] == "HELLO"
        guest = Guest(VmSpec(kernel=""), agent, channel, tmp_path, {})
        guest.helper_err = f"{run_dir}/helper.err"
        # 1. An epilogue that lasts until perflab has written 64 pages of TICKs through a one-page pipe.
        said: dict = {}
        runner = execute("touch began; while [ ! -e ticked ]; do sleep 0.05; done; echo folded > h.out", said)
        until("the helper's epilogue began", lambda: (run_dir / "began").exists(), backstop)
        writer = threading.Thread(target=lambda: [channel.send("TICK") for _ in range(64 * page // 20)], daemon=True)
        writer.start()
        writer.join(backstop)
        written = not writer.is_alive()
        (run_dir / "ticked").touch()       # lets a broken agent's epilogue end too
        assert written, "the agent did not read perflab's TICKs while the helper's epilogue ran"
        runner.join(backstop)
        assert said["result"].ok and said["helper"].output == "folded\n", said
        # 2. The channel ends during an epilogue: the agent ends it, and the sleep it started.
        said = {}
        runner = execute("echo $$ > post.pid; sleep 3600 & echo $! > child.pid; touch began2; wait", said)
        until("the second epilogue began", lambda: (run_dir / "began2").exists(), backstop)
        pids = [int((run_dir / name).read_text()) for name in ("post.pid", "child.pid")]
        agent.stdin.close()
        agent.wait(backstop)
        runner.join(backstop)
        for pid in pids:
            until(f"process {pid} of the epilogue ended with the agent", lambda: _gone(pid), backstop)
    finally:
        (run_dir / "ticked").touch()
        if not agent.stdin.closed:
            agent.stdin.close()          # the channel's end: the agent ends, and nothing of it stays
        agent.wait(30)
        agent.stdout.close()
        for name in ("post.pid", "child.pid"):
            with contextlib.suppress(OSError, ValueError):
                os.kill(int((run_dir / name).read_text()), signal.SIGKILL)
