"""Shared fixtures: the installed `perflab` CLI run as a subprocess on a temporary store."""

from __future__ import annotations

import io
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import traceback
from pathlib import Path

import pytest

# With PYTHONDONTWRITEBYTECODE=1 (this machine, CI) pytest rewrote every test module's asserts anew
# in each worker of each run, about 4 s of CPU a worker: its rewritten modules are kept
# (tests/__pycache__, checked against the source); the `perflab` processes still inherit the variable.
sys.dont_write_bytecode = False
# $PERFLAB_TEST_COMMAND: another entry point (tools/bench/suite.py's, which logs each process's CPU).
PERFLAB = (os.environ.get("PERFLAB_TEST_COMMAND") or shutil.which("perflab", path=os.path.dirname(sys.executable))
           or shutil.which("perflab"))

# A guest started by a `perflab` command may take this long to boot here (VmSpec's default is
# 60 s; a TCG boot takes 12-16 s, icount 21-26 s at load 8-12 on 2 cores, two side by side more):
# a test's verdict must not depend on the load, and a hung boot still fails, later.
os.environ.setdefault("PERFLAB_VM_BOOT_TIMEOUT", "300")
# Long steps speak after 2 s (core/steps.py): which ones did depends on the load, so in the tests
# no step speaks unless the test asks (PERFLAB_STEP_AFTER=0: every one, tests/test_steps.py).
os.environ.setdefault("PERFLAB_STEP_AFTER", "3600")


# Commands that read the store and print, leaving nothing behind (no child running, no signal
# handler, no lock): a test's `cli(...)` of one runs it in the test's own process, through the entry
# point's body with the same arguments, environment and directory, unless the test gives its own
# input or environment. A `perflab` process costs 0.1-0.2 s of CPU to start, the import of what
# the command needs; the fast lane started ~200 of these (docs/testing.md). Commands that run,
# write or kill stay processes, as does every test of process behaviour (its own subprocess).
IN_PROCESS = frozenset({"log", "runs", "show", "compare", "report", "export", "detect"})


class CLI:
    def __init__(self, db: Path, tmp: Path, cache: Path | None = None):
        self.db = db
        self.tmp = tmp
        # One compiler cache per test session (per xdist worker): binaries are keyed by
        # source, compiler and flags, so sharing is safe, and the launcher is built once.
        self.env = dict(os.environ, PERFLAB_DB=str(db), XDG_CACHE_HOME=str(cache or tmp / "cache"))
        self.env.pop("PERFLAB_DEBUG", None)

    def __call__(self, *args, check=True, input=None, timeout=120, env=None) -> subprocess.CompletedProcess:
        if args and str(args[0]) in IN_PROCESS and input is None and env is None:
            proc = self._in_process([str(a) for a in args])
        else:
            proc = subprocess.run([PERFLAB, *map(str, args)], capture_output=True, text=True, input=input,
                                  timeout=timeout, env=dict(self.env, **(env or {})), cwd=self.tmp)
        if check and proc.returncode != 0:
            raise AssertionError(f"perflab {' '.join(map(str, args))} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
        return proc

    def _in_process(self, args: list[str]) -> subprocess.CompletedProcess:
        """`perflab ARGS` as the entry point runs it (sys.exit(perflab.cli.main(ARGS))), in this process:
        the fixture's environment and directory, an empty standard input, its standard output and
        error taken as bytes (UTF-8; error's with backslashreplace, as Python's own) and read back
        as subprocess.run(text=True) reads a pipe; an escaped exception is a traceback and status 1."""
        from perflab.cli import main

        saved_env, saved_cwd, saved_streams = dict(os.environ), os.getcwd(), (sys.stdin, sys.stdout, sys.stderr)
        out, err = io.BytesIO(), io.BytesIO()
        wrappers = (io.TextIOWrapper(out, encoding="utf-8", write_through=True),
                    io.TextIOWrapper(err, encoding="utf-8", errors="backslashreplace", write_through=True))
        sys.stdout, sys.stderr = wrappers
        sys.stdin = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
        os.environ.clear()
        os.environ.update(self.env)
        os.chdir(self.tmp)
        try:
            rc = main(args)
        except SystemExit as e:
            rc = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        except BaseException:
            traceback.print_exc()
            rc = 1
        finally:
            for wrapper in wrappers:
                wrapper.flush()
                wrapper.detach()   # a dropped wrapper would close its buffer
            sys.stdin, sys.stdout, sys.stderr = saved_streams
            os.chdir(saved_cwd)
            os.environ.clear()
            os.environ.update(saved_env)

        def text(data: bytes) -> str:
            return data.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")
        return subprocess.CompletedProcess([PERFLAB, *args], rc, text(out.getvalue()), text(err.getvalue()))

    def popen(self, *args, **kw) -> subprocess.Popen:
        return subprocess.Popen([PERFLAB, *map(str, args)], env=self.env, cwd=self.tmp,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)

    def sql(self, query: str, params=()) -> list[tuple]:
        con = sqlite3.connect(self.db)
        try:
            return con.execute(query, params).fetchall()
        finally:
            con.close()


@pytest.fixture(scope="session")
def shared_cache(tmp_path_factory) -> Path:
    """One compiler (and initramfs) cache for the whole session, all xdist workers together: a
    binary is keyed by source, compiler and flags and renamed into place whole (core.cbuild), so
    workers share it safely, and each program is compiled once, not once per worker."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = tmp_path_factory.getbasetemp().parent / "cbuild-shared"
        shared.mkdir(exist_ok=True)
        return shared
    return tmp_path_factory.mktemp("cbuild-shared")


@pytest.fixture
def system_thp(tmp_path_factory):
    """This machine's system-wide THP mode held for the test, against the other workers' tests: a
    will-it-scale run with `--thp` here sets it (and restores it after), and a test that checks it
    untouched would see the other's setting. An exclusive lock on one file of the session."""
    import fcntl

    base = tmp_path_factory.getbasetemp()
    lock = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "system-thp.lock"
    with open(lock, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


@pytest.fixture
def cli(tmp_path, shared_cache) -> CLI:
    assert PERFLAB, "the perflab command is not installed in this environment"
    return CLI(tmp_path / "perflab.db", tmp_path, shared_cache)


def assert_one_line_error(proc: subprocess.CompletedProcess, *needles: str) -> None:
    """Bad input ends with a single line on stderr naming the fault, and a non-zero status."""
    assert proc.returncode != 0, proc.stdout
    lines = [l for l in proc.stderr.splitlines() if l.strip()]
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    for n in needles:
        assert n in lines[0], (n, lines[0])


# Real services on loopback (tests/services.py): a PostgreSQL cluster per session with a
# fresh database per test (`postgres_url`), and a redis-server per test (`redis_server`).
from services import postgres_cluster, postgres_url, redis_server  # noqa: E402,F401


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request, tmp_path) -> str:
    """The store of one test on each backend: an SQLite file, then a fresh PostgreSQL database."""
    if request.param == "sqlite":
        return str(tmp_path / "perflab.db")
    return request.getfixturevalue("postgres_url")


# -- lanes: markers assigned here, by file and fixture, not in every test file ---------
#
# `sh tools/test.sh --fast` deselects every marker below: what is left needs no Debian package
# (beyond a C compiler and git) and no root, and runs in under 2 minutes. The full command runs
# everything, and there a skip that hides a missing capability fails the session (see
# pytest_sessionfinish).

# Files whose tests run real benchmarks (compile suites, sweep loads, spawn many processes), or
# take most of the fast lane's time (test_importers: big imports; test_runner and test_run_cmd:
# the real executor, whose loop tests/test_runner_fast.py checks in milliseconds; test_output_identity:
# every report of a whole store through the CLI, 40 s of a 2-minute lane).
SLOW_FILES = {
    "test_aim7.py", "test_bisect.py", "test_ebizzy.py", "test_fio.py", "test_hackbench.py", "test_interruption.py",
    "test_kernbench.py", "test_lmbench.py", "test_news.py", "test_robot.py", "test_will_it_scale_c.py",
    "test_importers.py", "test_runner.py", "test_run_cmd.py", "test_output_identity.py",
    "test_hostile_strings.py", "test_hostile_output.py",   # every command on a hostile store; every -o
    "test_hostile_temp.py",   # kill -9 of fio and perf runs
    "test_ssh_target.py",     # an sshd (Debian package openssh-server) and real runs over it
    "test_ssh_perf.py",       # the same sshd, perf run on its far side
    "test_lab_ssh.py",        # the lab's workers and bisect driving that sshd as a machine
    "test_kexec_box.py",      # a simulated test box (QEMU, TCG) kexec'ed into Debian kernels: minutes
    # `perflab series` builds and measures each patch of a real mailbox, and the mail's reproduce
    # steps clone, build and measure both sides: real benchmark runs, a third of the fast lane's time
    "test_patch_series.py", "test_series_reproduce.py",
}
# Single slow tests in otherwise fast files (measured: the longest of the fast lane).
SLOW_TESTS = {
    "test_stats.py": {"test_aa_false_regression_rate_at_most_alpha"},
    "test_jobs.py": {"test_report_scaling_and_lkp_compare_shape", "test_a_hung_testcase_is_killed_and_the_matrix_goes_on",
                     "test_will_it_scale_sweep_stores_lkp_metrics_scalability_and_facts"},
    "test_monitor_layout.py": {"test_fail_on_cli"},
    "test_regression_report.py": {"test_check_runs_a_job_and_says_when_samples_are_blind"},
    "test_mail.py": {"test_the_reproduce_steps_measure_both_sides_and_the_job_holds_only_what_differs",
                     "test_the_base_runs_exported_beside_the_mail_are_what_the_steps_compare_with"},
    "test_transfer.py": {"test_bad_import_files_write_nothing"},
    "test_kconfig.py": {"test_kernel_config_writes_a_config_with_every_option_from_tinyconfig"},
    "test_store_faults.py": {"test_reading_commands_work_on_a_read_only_store"},
    "test_ux_run.py": {"test_one_job_file_compares_compilers_and_report_lmbench_prints_a_row_each"},
}
# Tests that need root (beyond those whose skipif reason says so): file -> test names, "*" for all.
ROOT_TESTS = {
    "test_filesystem.py": {"test_a_filesystem_is_made_used_and_removed", "test_undone_when_the_run_fails_inside",
                           "test_undone_while_the_benchmark_is_still_being_killed",
                           "test_mkfs_failure_undoes_what_was_made",
                           "test_sizes_and_bad_values_are_refused_before_anything_is_made",
                           "test_without_root_a_one_line_error_says_what_is_missing",
                           "test_a_stale_mount_of_a_dead_owner_is_removed_before_the_next_mount",
                           "test_sigkill_mid_run_then_the_next_command_cleans_up_and_says_so",
                           "test_sigterm_mid_run_undoes_the_filesystem_before_perflab_exits"},
    "test_fio.py": {"test_on_fresh_filesystems_random_read_is_not_faster_than_sequential_and_nothing_stays_mounted"},
}
# Programs a test skips without, that tools/test.sh installs: file -> (test names, "*" for all or
# "skipif" for those with a skipif mark, programs).
TOOL_TESTS = {
    "test_fio.py": ("*", ("fio",)),
    "test_monitors_perf.py": ("skipif", ("perf",)),
    "test_ssh_perf.py": ("skipif", ("perf",)),
    "test_aim7.py": ({"test_disk_tasks_on_a_fresh_xfs"}, ("mkfs.xfs",)),
    "test_filesystem.py": ("*", ("mkfs.ext4", "mkfs.xfs", "mkfs.btrfs")),
    "test_instructions.py": ("*", ("valgrind",)),
    "test_hostile_temp.py": ("skipif", ("fio", "perf")),
    "test_hostile_perf.py": ("skipif", ("perf", "setpriv")),
    "test_kexec_box.py": ("*", ("mmdebstrap", "qemu-system-x86_64", "qemu-img")),
    "test_test_sh.py": ("*", ("dpkg-query", "xz")),     # and linux-source-6.1's tarball
}
FILES_BY_MARK = {"box": {"test_kexec_box.py"},
                 "postgres": {"test_store_postgres.py", "test_services.py"},
                 "redis": {"test_lab.py", "test_lab_bisect.py", "test_services.py"}}
FIXTURES_BY_MARK = {"postgres": {"postgres_url", "postgres_cluster"}, "redis": {"redis_server"},
                    "browser": {"browser"}}


def _named(table: dict, item) -> bool:
    names = table.get(item.path.name, ())
    return names == "*" or item.originalname in names


def _tools_of(item) -> tuple[str, ...]:
    """The programs (installed by tools/test.sh) without which `item` skips itself."""
    names, tools = TOOL_TESTS.get(item.path.name, ((), ()))
    if names == "*" or item.originalname in names or (names == "skipif" and item.get_closest_marker("skipif")):
        return tools
    return ()


def _marks_of(item) -> set[str]:
    marks = set()
    file = item.path.name
    if file in SLOW_FILES or _named(SLOW_TESTS, item):
        marks.add("slow")
    # "needs root", "as root", not a path under /root/ (a skip reason naming ~/.cache as root's)
    if _named(ROOT_TESTS, item) or any(re.search(r"(?<![/\w])root\b(?!/)", str(m.kwargs.get("reason", "")))
                                       for m in item.iter_markers("skipif")):
        marks.add("root")
    if _tools_of(item):
        marks.add("tool")
    fixtures = set(getattr(item, "fixturenames", ()))
    for mark, files in FILES_BY_MARK.items():
        if file in files:
            marks.add(mark)
    for mark, names in FIXTURES_BY_MARK.items():
        if fixtures & names:
            marks.add(mark)
    callspec = getattr(item, "callspec", None)
    if callspec is not None and callspec.params.get("store_url") == "postgresql":
        marks.add("postgres")
    return marks


def _file_marks(name: str) -> set[str]:
    """The marks every test of a file carries (its file's lane)."""
    return ({"slow"} if name in SLOW_FILES else set()) | {m for m, files in FILES_BY_MARK.items() if name in files}


def pytest_ignore_collect(collection_path, config):
    """A file whose every test `-m` deselects by its file's marks alone is not imported (the fast lane
    would import the slow files' modules, and what they import, in each worker only to deselect them:
    docs/testing.md). True only if the expression is false for those marks whatever the others are."""
    marks, expr = _file_marks(collection_path.name), config.getoption("markexpr", "")
    if not marks or not expr or "=" in expr:
        return None
    from _pytest.mark.expression import Expression
    names = sorted(set(re.findall(r"[A-Za-z_][\w.]*", expr)) - {"and", "or", "not"} - marks)
    if len(names) > 12:
        return None
    compiled = Expression.compile(expr)
    for bits in range(1 << len(names)):
        on = marks | {n for i, n in enumerate(names) if bits >> i & 1}
        if compiled.evaluate(lambda name, /, **kw: name in on):
            return None
    return True


@pytest.hookimpl(hookwrapper=True)
def pytest_collection_modifyitems(config, items):
    # Before every other plugin's hook: the marks -m selects by; after them (-m has deselected), the order.
    for item in items:
        for mark in sorted(_marks_of(item)):
            item.add_marker(getattr(pytest.mark, mark))
    yield
    _longest_first(config, items)


# -- order: the longest tests at the head of each worker's share (issue 47, item 2) -------------
#
# xdist's worksteal gives each of the N workers a contiguous Nth of the collection and lets an
# idle one steal the back half of the longest queue: a long test collected late (test_vm*.py,
# test_will_it_scale_c.py come last) starts late and makes the run's tail, one worker busy while
# the others have nothing left. These tests, the longest measured (wall seconds of the call phase
# in a whole quiet `-n 3` run, tools/bench/suite.py --durations), go first; the rest keep their
# collected order. A test with a module-scoped fixture other than those in CHEAP_MODULE_FIXTURES
# stays in place (moving it would build the fixture twice). Every worker computes the same order
# from the same collection, worker count and CPU count, as xdist requires; without xdist (or with
# another --dist) nothing moves.
LONG_TESTS = {
    "test_lab_ssh.py::test_the_robot_on_an_ssh_machine_reports_the_planted_regression_once": 37,
    "test_kernel_bisect.py::test_bisect_names_the_kernel_that_slowed_getppid_and_skips_the_one_that_does_not_build": 34,
    "test_robot.py::test_robot_finds_bisects_and_reports_a_planted_regression_once": 25,
    "test_patch_series.py::test_a_sleep_is_timing_only_and_a_later_patch_can_keep_the_change_after_the_revert": 23,
    "test_lab_bisect.py::test_robot_on_a_lab_box_reports_the_planted_regression_once": 19,
    "test_kconfig.py::test_kernel_config_writes_a_config_with_every_option_from_tinyconfig": 19,
    "test_patch_series.py::test_bisect_kind_labels_the_culprit_against_its_parent": 18,
    "test_vm_runs.py::test_under_icount_a_will_it_scale_sample_is_a_number_of_operations_in_one_guest_or_two": 17,
    "test_runner.py::test_ctrl_c_during_fast_repetitions_is_always_clean": 17,
    "test_vm_runs.py::test_icount_figures_are_the_same_in_one_guest_and_in_two_side_by_side": 16,
    "test_lab_ssh.py::test_a_kernel_bisection_on_the_box_of_a_machine_is_checked_first_then_goes_as_far_as_the_kexec": 16,
    "test_vm.py::test_icount_is_repeatable_across_boots_and_waits_for_a_helper_slow_on_the_hosts_io": 16,
    "test_insn_profile.py::test_an_icount_guest_gives_monitors_and_an_exact_profile_of_its_kernel": 13,
    "test_lab_ssh.py::test_bisect_on_the_box_of_a_machine_builds_on_the_worker_and_measures_on_the_machine": 12,
    "test_stats.py::test_aa_false_regression_rate_at_most_alpha": 12,
    "test_patch_series.py::test_a_timed_regression_is_named_checked_by_revert_labelled_code_path_and_mailed": 11,
    "test_hostile_lab.py::test_submit_wait_on_a_box_without_worker_says_so": 11,
    "test_lab_ssh.py::test_series_on_an_ssh_machine_names_the_patch_measured_there": 10,
    "test_lab_bisect.py::test_bisect_on_a_lab_box_finds_the_commit_and_skips_the_unbuildable_one": 9,
    "test_lab.py::test_two_boxes_survive_a_killed_worker_and_a_store_outage": 8,
    "test_insn_profile.py::test_a_job_cannot_forge_the_kernel_symbols_that_name_the_counts": 8,
    "test_lab_ssh.py::test_bisect_on_an_ssh_machine_finds_the_commit_with_every_step_measured_there": 8,
    "test_lab_ssh.py::test_bisect_on_a_machine_refuses_what_does_not_run_there": 8,
}
# Of those, the ones that mostly wait: their CPU (their own and that of every process they waited
# for, tools/bench/suite_cpu.py) is under 0.4 of their wall time, spent in planted sleeps, a robot's
# runs of `sleep`, a worker's polls. Dealt over the workers like the others, three of them started
# side by side and left the two cores a third used for 20 s (per-second /proc/stat of a whole run).
# They head the shares of the workers beyond the cores (one lane of 3 workers on 2 cores), one
# after the other, while the other workers start on the long tests that compute.
WAITING_TESTS = {
    "test_lab_ssh.py::test_the_robot_on_an_ssh_machine_reports_the_planted_regression_once",       # 0.29
    "test_robot.py::test_robot_finds_bisects_and_reports_a_planted_regression_once",               # 0.19
    "test_patch_series.py::test_a_sleep_is_timing_only_and_a_later_patch_can_keep_the_change_after_the_revert",  # 0.32
    "test_lab_bisect.py::test_robot_on_a_lab_box_reports_the_planted_regression_once",             # 0.24
    "test_patch_series.py::test_bisect_kind_labels_the_culprit_against_its_parent",                # 0.21
    "test_lab_ssh.py::test_a_kernel_bisection_on_the_box_of_a_machine_is_checked_first_then_goes_as_far_as_the_kexec",  # 0.26
    "test_patch_series.py::test_a_timed_regression_is_named_checked_by_revert_labelled_code_path_and_mailed",  # 0.38
    "test_hostile_lab.py::test_submit_wait_on_a_box_without_worker_says_so",                       # 0.05
}
CHEAP_MODULE_FIXTURES = {"far"}     # test_lab_ssh's sshd: a key and a process, well under a second


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):
    # xdist's controller, for each worker: a worker's own --dist reads "no", so it is told the run's.
    node.workerinput["perflab_dist"] = node.config.getoption("dist")


def _longest_first(config, items) -> None:
    given = getattr(config, "workerinput", {})
    workers = given.get("workercount")
    if not workers or workers < 2 or given.get("perflab_dist") != "worksteal":
        return

    def key(item) -> str:
        return f"{item.path.name}::{item.name}"

    def weight(item) -> float:
        seconds = LONG_TESTS.get(key(item), 0)
        defs = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {})
        if seconds and any(d.scope != "session" and d.scope != "function" and name not in CHEAP_MODULE_FIXTURES
                           for name, ds in defs.items() for d in ds):
            return 0
        return seconds

    longest = sorted((item for item in items if weight(item)), key=weight, reverse=True)
    if not longest:
        return
    # The shares as worksteal cuts them: len(pending) // workers left, in order.
    sizes, left = [], len(items)
    for k in range(workers):
        sizes.append(left // (workers - k))
        left -= sizes[-1]
    # The waiting tests' lanes: the workers beyond the cores (at least one, never all of them).
    waiting = any(key(item) in WAITING_TESTS for item in longest)
    lanes = min(workers - 1, max(1, workers - (os.cpu_count() or 1))) if waiting else 0
    heads, loads = [[] for _ in range(workers)], [0.0] * workers
    for item in longest:
        waits = key(item) in WAITING_TESTS
        shares = [k for k in range(workers) if (k < lanes) == waits and len(heads[k]) < sizes[k]] or \
            [k for k in range(workers) if len(heads[k]) < sizes[k]]
        if shares:
            k = min(shares, key=lambda k: (loads[k], len(heads[k])))
            heads[k].append(item)
            loads[k] += weight(item)
    moved = {id(item) for head in heads for item in head}
    rest = iter([item for item in items if id(item) not in moved])
    items[:] = [item for k in range(workers) for item in heads[k] + [next(rest) for _ in range(sizes[k] - len(heads[k]))]]


# -- honest skips: in the full run (tools/test.sh sets PERFLAB_TEST_FULL=1) a skip that hides a
# capability the machine has fails the test instead of showing a quiet "s": a test that needs
# root skipped while running as root, or a tool-gated test skipped although its programs are
# installed. The report itself is turned into a failure, so this holds under xdist too.

def _dishonest(item, reason: str) -> str | None:
    if item.get_closest_marker("root") is not None and os.geteuid() == 0:
        return f"needs root and runs as root, yet skipped ({reason})"
    tools = _tools_of(item)
    if tools and all(shutil.which(t) for t in tools):
        return f"{', '.join(tools)} installed, yet skipped ({reason})"
    return None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if not report.skipped or os.environ.get("PERFLAB_TEST_FULL") != "1" or hasattr(report, "wasxfail"):
        return
    reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    why = _dishonest(item, reason.removeprefix("Skipped: "))
    if why is not None:
        report.outcome = "failed"
        report.longrepr = f"{item.nodeid}: {why} (PERFLAB_TEST_FULL=1: the full run may not skip it)"
