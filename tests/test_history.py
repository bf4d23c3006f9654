"""`perflab log`, `runs`, `show`, `annotate`, `env`."""

import re

from conftest import assert_one_line_error


def test_log_one_line_per_run_oldest_first(cli):
    cli("run", "cmd", "--runs", "2", "--tag", "c.1", "--", "sleep", "0.15")
    cli("run", "cmd", "--runs", "2", "--tag", "c.2", "--", "sleep", "0.01")
    cli("annotate", "2", "fewer opens: just rewind the spool file")
    lines = cli("log").stdout.splitlines()
    header, rows = lines[0], lines[2:]
    assert re.search(r"date\s+real\s+user\s+sys", header)
    assert len(rows) == 2
    assert rows[0].split()[0] == "1" and "c.1" in rows[0] and "sleep 0.15" in rows[0]
    assert rows[1].split()[0] == "2" and "fewer opens: just rewind the spool file" in rows[1]
    real1 = float(rows[0].split()[3])
    real2 = float(rows[1].split()[3])
    # Each row's real is its own run's mean wall time (four significant figures), whatever load did
    # to the sleeps; never shorter than the sleep, and far below a wrong unit (ms stored as s: 150).
    stored = dict(cli.sql("SELECT run_id, AVG(value) FROM sample WHERE metric = 'time.elapsed_time' GROUP BY run_id"))
    assert abs(real1 - stored[1]) / stored[1] < 1e-3 and abs(real2 - stored[2]) / stored[2] < 1e-3
    assert 0.15 <= real1 < 5.0 and 0.01 <= real2 < 5.0


def test_log_per_unit_of_work(cli):
    cli("run", "cmd", "--runs", "2", "--", "sleep", "0.05")
    whole = float(cli("log").stdout.splitlines()[2].split()[3])
    per = cli("log", "--per", "10").stdout.splitlines()
    assert "s/10" in per[1]
    assert abs(float(per[2].split()[3]) - whole / 10) < 1e-3


def test_log_filters_by_benchmark_name(cli):
    cli("run", "cmd", "--runs", "1", "--name", "rnews", "--", "true")
    cli("run", "cmd", "--runs", "1", "--", "sleep", "0.001")
    out = cli("log", "rnews").stdout
    assert "rnews" in out and "sleep" not in out
    assert len(cli("log", "cmd").stdout.splitlines()) == 4


def test_runs_filters(cli):
    cli("run", "cmd", "--runs", "1", "--tag", "a", "--box", "b1", "--", "true")
    cli("run", "cmd", "--runs", "1", "--tag", "b", "--box", "b2", "--", "true")
    out = cli("runs", "--tag", "b").stdout
    assert re.search(r"^\s*2\s.*finished\s+b2\s+cmd\s+b\s", out, re.M) and not re.search(r"^\s*1\s", out, re.M)
    out = cli("runs", "--box", "b1").stdout
    assert re.search(r"^\s*1\s", out, re.M) and not re.search(r"^\s*2\s", out, re.M)
    assert re.search(r"^\s*2\s", cli("runs", "--since", "1d").stdout, re.M)
    assert not re.search(r"^\s*\d+\s", cli("runs", "--since", "2999-01-01").stdout, re.M)
    assert_one_line_error(cli("runs", "--since", "yesterday", check=False), "yesterday")


def test_show_prints_summary_and_samples(cli):
    cli("run", "cmd", "--runs", "5", "--", "sleep", "0.01")
    out = cli("show", "1").stdout
    assert "run #1" in out and "finished" in out
    assert re.search(r"metric\s+unit\s+n\s+figure\s+of\s+median\s+stddev\s+CoV\s+min\s+max", out)
    row = next(l for l in out.splitlines() if l.strip().startswith("time.elapsed_time "))
    fields = row.split()
    assert fields[1] == "s" and fields[2] == "5"
    mean, median, mn, mx = float(fields[3]), float(fields[5]), float(fields[8]), float(fields[9])
    assert fields[4] == "mean"      # a lower-is-better time: its arithmetic mean
    assert 0.01 <= mn <= median <= mx and mn <= mean <= mx
    assert fields[7].endswith("%")
    samples_line = next(l for l in out.splitlines() if l.strip().startswith("time.elapsed_time:"))
    assert len(samples_line.split()) == 6  # the name and five repetitions


def test_env_prints_facts(cli):
    out = cli("env").stdout
    for key in ("kernel_release", "cpu_model", "memory_kib", "thp_enabled", "cpufreq_governor", "aslr", "cc_version", "libc"):
        assert re.search(rf"^{key}\s+\S", out, re.M), key


def test_env_diff_between_runs(cli):
    cli("run", "cmd", "--runs", "1", "--box", "alpha", "--", "true")
    cli("run", "cmd", "--runs", "1", "--box", "beta", "--", "true", env={"CC": "gcc"})
    out = cli("env", "--diff", "1", "2").stdout
    assert re.search(r"^testbox\s+alpha\s+->\s+beta", out, re.M)
    assert re.search(r"^cc\s+cc\s+->\s+gcc", out, re.M)
    assert "kernel_release" not in out
    assert_one_line_error(cli("env", "--diff", "1", "77", check=False), "77")


HOSTILE = "\x1b]0;pwn\x07\x1b[2J[bold]x[/]"


def test_control_characters_are_shown_not_obeyed(cli):
    cli("run", "cmd", "--runs", "2", "--tag", HOSTILE, "--box", "box\x1b[31m", "--name", "n\x1b[2Jame", "--", "true")
    cli("run", "cmd", "--runs", "1", "--box", "other", "--", "true")
    cli("annotate", "1", "note\x1b[2J")
    outputs = [cli("runs").stdout, cli("log").stdout, cli("show", "1").stdout, cli("env", "--diff", "1", "2").stdout,
               cli("annotate", "1", "again\x1b[2J").stdout]
    for out in outputs:
        assert "\x1b" not in out and "\x07" not in out, out
        assert "\\x1b" in out, out
    runs, log, show, diff, annotate = outputs
    # rich would have taken [bold]...[/] as markup and dropped it
    assert "\\x1b]0;pwn\\x07\\x1b[2J[bold]x[/]" in runs and "\\x1b]0;pwn\\x07" in log and "[bold]x[/]" in show
    assert "box\\x1b[31m" in diff and "n\\x1b[2Jame" in show and "again\\x1b[2J" in annotate


def test_long_strings_are_bounded_on_screen(cli):
    cli("run", "cmd", "--runs", "1", "--name", "n" * 500, "--", "true")
    cli("annotate", "1", "c" * 100_000)
    runs = cli("runs").stdout.splitlines()
    assert len(runs) == 2 and max(map(len, runs)) < 200
    log = cli("log").stdout.splitlines()
    assert len(log) == 3 and max(map(len, log)) < 300 and "(+" in log[2]
    show = cli("show", "1").stdout.splitlines()
    comment = next(l for l in show if l.startswith("  comment"))
    assert 1000 <= len(comment) < 1100 and "(+99" in comment
    assert len(cli("annotate", "1", "d" * 100_000).stdout) < 1100
    assert cli.sql("SELECT length(comment) FROM run") == [(100_000,)]  # kept whole


def test_strings_longer_than_the_store_keeps_are_refused_before_writing(cli):
    cli("run", "cmd", "--runs", "1", "--tag", "t" * 255, "--box", "b" * 255, "--name", "n" * 500, "--", "true")
    for option, value, limit in (("--tag", "t" * 256, 255), ("--box", "b" * 100_000, 255), ("--name", "n" * 501, 500)):
        proc = cli("run", "cmd", "--runs", "1", option, value, "--", "true", check=False)
        assert_one_line_error(proc, option, str(limit))
        assert len(proc.stderr) < 200
    assert cli.sql("SELECT count(*) FROM run") == [(1,)]
    assert cli.sql("SELECT count(*) FROM testbox") == [(1,)]


def test_log_of_an_unknown_benchmark_names_those_there_are(cli):
    assert "no runs recorded yet" in cli("log").stderr
    cli("run", "cmd", "--runs", "1", "--name", "rnews", "--", "true")
    cli("run", "cmd", "--runs", "1", "--tag", "t1", "--", "sleep", "0.001")
    for command in (["log", "NOSUCHBENCH"], ["runs", "--benchmark", "NOSUCHBENCH"]):
        proc = cli(*command, check=False)
        assert_one_line_error(proc, "NOSUCHBENCH", "cmd", "rnews", "sleep 0.001")
        assert "recorded yet" not in proc.stderr
    proc = cli("log", "rnews", "--tag", "t1")
    assert "no run matches these filters" in proc.stderr and "recorded yet" not in proc.stderr


def test_log_per_refuses_non_finite_and_tiny_divisors(cli):
    for value in ("nan", "inf", "0", "1e-320"):
        proc = cli("log", "--per", value, check=False)
        assert_one_line_error(proc, "--per")
        assert proc.returncode == 2, value
