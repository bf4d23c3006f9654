"""`perflab log`, `runs`, `show`, `annotate`, `env`."""

import re

from conftest import assert_one_line_error


def test_log_one_line_per_run_oldest_first(cli):
    cli("run", "cmd", "--runs", "2", "--tag", "c.1", "--", "sleep", "0.02")
    cli("run", "cmd", "--runs", "2", "--tag", "c.2", "--", "sleep", "0.01")
    cli("annotate", "2", "fewer opens: just rewind the spool file")
    lines = cli("log").stdout.splitlines()
    header, rows = lines[0], lines[2:]
    assert re.search(r"date\s+real\s+user\s+sys", header)
    assert len(rows) == 2
    assert rows[0].split()[0] == "1" and "c.1" in rows[0] and "sleep 0.02" in rows[0]
    assert rows[1].split()[0] == "2" and "fewer opens: just rewind the spool file" in rows[1]
    real1 = float(rows[0].split()[3])
    real2 = float(rows[1].split()[3])
    assert 0.02 <= real1 < 0.2 and 0.01 <= real2 < real1


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
    assert re.search(r"metric\s+unit\s+n\s+mean\s+median\s+stddev\s+CoV\s+min\s+max", out)
    row = next(l for l in out.splitlines() if l.strip().startswith("time.elapsed_time "))
    fields = row.split()
    assert fields[1] == "s" and fields[2] == "5"
    mean, median, mn, mx = float(fields[3]), float(fields[4]), float(fields[7]), float(fields[8])
    assert 0.01 <= mn <= median <= mx and mn <= mean <= mx
    assert fields[6].endswith("%")
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
