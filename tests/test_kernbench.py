"""The kernbench family: the generated tree, real builds at both loads, its report and compare layout."""

from __future__ import annotations

import json
import os
import re

import pytest

from conftest import assert_one_line_error
from perflab.benchmarks.kernbench.family import FAMILY, load_jobs
from perflab.benchmarks.kernbench.tree import generate
from perflab.benchmarks.base import JobError

CPUS = len(os.sched_getaffinity(0))
HALF, OPTIMAL = max(1, CPUS // 2), CPUS * 2
METRICS = ("kernbench.elapsed_time", "kernbench.user_time", "kernbench.system_time", "kernbench.percent_cpu",
           "kernbench.context_switches", "kernbench.sleeps")
LINES = ("Elapsed Time", "User Time", "System Time", "Percent CPU", "Context Switches", "Sleeps")


def _files(root):
    out = {}
    for d, _, names in os.walk(root):
        for n in names:
            p = os.path.join(d, n)
            out[os.path.relpath(p, root)] = open(p, "rb").read()
    return out


def test_generated_tree_is_deterministic_and_kernel_shaped(tmp_path):
    a, b, c = generate(tmp_path / "a", "tiny", 7), generate(tmp_path / "b", "tiny", 7), generate(tmp_path / "c", "tiny", 8)
    assert a.digest == b.digest and _files(a.path) == _files(b.path)
    assert c.digest != a.digest
    full = generate(tmp_path / "full", "full", 1)
    assert full.files >= 300 and full.headers >= 40           # hundreds of C files
    files = _files(full.path)
    makefile = files["Makefile"].decode()
    objects = [f for f in files if f.endswith(".c")]
    for src in objects:                                         # one rule per object, with its headers
        assert re.search(rf"^{re.escape(src[:-2])}\.o: {re.escape(src)} ", makefile, re.M), src
    # Shared headers are included from several directories.
    users: dict[str, set] = {}
    for src in objects:
        for inc in re.findall(rb'#include "(kb/gen/[^"]+)"', files[src]):
            users.setdefault(inc, set()).add(os.path.dirname(src))
    assert max(len(dirs) for dirs in users.values()) >= 5
    assert any(len(re.findall(rb"\tcase \d+:", files[s])) >= 60 for s in objects)   # some big functions


def test_loads_resolve_to_make_jobs():
    assert load_jobs("half", 1) == 1 and load_jobs("half", 16) == 8
    assert load_jobs("optimal", 16) == 32 and load_jobs(3, 16) == 3
    with pytest.raises(JobError, match=r"jobs = 0: .*half, optimal"):
        FAMILY.parse_params({"jobs": 0})
    with pytest.raises(JobError, match=r"size = 'huge'.*'tiny', 'small' or 'full'"):
        FAMILY.parse_params({"size": "huge"})


@pytest.fixture(scope="module")
def built(tmp_path_factory, shared_cache):
    """Real tiny builds at both loads: base twice per load, head once."""
    from conftest import CLI

    tmp = tmp_path_factory.mktemp("kernbench")
    cli = CLI(tmp / "perflab.db", tmp, shared_cache)
    base = cli("run", "kernbench", "--size", "tiny", "--jobs", "half", "--jobs", "optimal", "--runs", "2",
               "--tag", "base")
    cli("run", "kernbench", "--size", "tiny", "--jobs", "half", "--jobs", "optimal", "--runs", "1", "--tag", "head")
    return cli, base


def test_tiny_builds_store_kernbench_figures(built):
    cli, base = built
    assert "Half load -j" in base.stdout and "Optimal load -j" in base.stdout, base.stdout
    runs = cli.sql("select id, params, status from run where tag='base' order by id")
    assert [json.loads(p)["jobs"] for _, p, _ in runs] == [HALF, OPTIMAL]
    assert [json.loads(p)["load"] for _, p, _ in runs] == ["half", "optimal"]
    assert {s for _, _, s in runs} == {"finished"}
    for run_id, _, _ in runs:
        values: dict[str, list[float]] = {}
        for metric, value in cli.sql("select metric, value from sample where run_id=?", (run_id,)):
            values.setdefault(metric, []).append(value)
        assert sorted(values) == sorted(METRICS) and all(len(v) == 2 for v in values.values())
        for rep in range(2):
            elapsed, user, system = (values[m][rep] for m in METRICS[:3])
            assert elapsed > 0 and user > 0 and system >= 0
            assert 1 <= values["kernbench.percent_cpu"][rep] <= 100 * CPUS
            assert values["kernbench.percent_cpu"][rep] == pytest.approx((user + system) / elapsed * 100, rel=1e-6)
            assert values["kernbench.sleeps"][rep] > 0          # make waits for its children
    facts = json.loads(cli.sql("select e.facts from run r join environment e on e.id = r.environment_id where r.id=?",
                                 (runs[0][0],))[0][0])
    assert re.fullmatch(r"[0-9a-f]{64}", facts["kernbench_tree_sha256"]) and "tiny" in facts["kernbench_tree"]


def test_report_kernbench_prints_the_blocks(built):
    cli, _ = built
    out = cli("report", "kernbench", "base", "head").stdout
    half, optimal = out.index(f"Average Half load -j {HALF} Run (std deviation):"), \
        out.index(f"Average Optimal load -j {OPTIMAL} Run (std deviation):")
    assert half < optimal
    for block in (out[half:optimal], out[optimal:]):
        assert re.search(r"^\s+base\s+head$", block, re.M), block
        for name in LINES:
            assert re.search(rf"^{name}\s+[\d.]+ \([\d.e+-]+\)\s+[\d.]+ \([-\d.e+]+\)\s+[+-]?\d+\.\d\d%$", block, re.M) \
                or re.search(rf"^{name}\s+[\d.]+ \([\d.e+-]+\)\s+[\d.]+ \(-\)\s+", block, re.M), (name, block)
    alone = cli("report", "kernbench").stdout                  # every tag of this box, a column each
    assert re.search(r"^\s+base\s+head$", alone, re.M)


def test_compare_kernbench_style_prints_the_blocks(built):
    cli, _ = built
    out = cli("compare", "base", "head", "--style", "kernbench").stdout
    assert f"Average Half load -j {HALF} Run (std deviation):" in out
    assert f"Average Optimal load -j {OPTIMAL} Run (std deviation):" in out
    elapsed = next(l for l in out.splitlines() if l.startswith("Elapsed Time"))
    assert re.search(r"^Elapsed Time\s+\S+ \(\S+\)\s+\S+ \(\S+\)\s+[+-]?\d+\.\d\d%\s+\[", elapsed), elapsed
    assert "too few samples to tell" in elapsed                # 2 vs 1 builds: said out loud
    assert "FDR family of head vs base:" in out


def test_real_tree_builds_in_place(cli, tmp_path):
    src = generate(tmp_path / "linux", "tiny", 3).path
    (src / "vmlinux").write_text("stale\n")                   # make clean removes it before the build
    proc = cli("run", "kernbench", "--tree", src, "--target", "vmlinux", "--jobs", "2", "--runs", "1")
    assert "Load -j 2" in proc.stdout
    assert (src / "vmlinux").read_bytes()[:4] == b"\x7fELF"
    (params,) = cli.sql("select params from run")
    assert json.loads(params[0])["tree"] == str(src) and json.loads(params[0])["load"] == "custom"


@pytest.mark.parametrize("tree,needle", [("/nonexistent/linux", "no such directory"), (None, "has no Makefile")])
def test_bad_tree_is_refused_before_anything_runs(cli, tmp_path, tree, needle):
    tree = tree or str(tmp_path)
    proc = cli("run", "kernbench", "--tree", tree, "--runs", "1", check=False)
    assert_one_line_error(proc, "tree", needle)
    assert not cli.db.exists() or cli.sql("select count(*) from run") == [(0,)]


def test_tree_with_fs_or_dir_is_refused(cli, tmp_path):
    src = generate(tmp_path / "t", "tiny", 1).path
    proc = cli("run", "kernbench", "--tree", src, "--dir", tmp_path, check=False)
    assert_one_line_error(proc, "tree", "fs/dir")
