"""A kernel bisection for real (issue 20, item 5): git, the build command, QEMU in icount mode, the runner.

The "kernel tree" is a git repository whose build command copies one of the two cached Debian
kernels (tools/fetch_kernel.py --both: 6.1.170 and 6.1.176, whose getppid path differs by
~0.6% of instruction-time) to $KBUILD_OUTPUT/arch/x86/boot/bzImage, as the file kernel.txt of
the commit says; one commit does not build, one (in a tree of its own) "builds" garbage.
will-it-scale getppid1 runs in a guest booted from each commit's image. Skipped with the reason without QEMU or the kernels.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import assert_one_line_error
from perflab.automate import bisect
from perflab.automate.bisect.trees import measurer_spec, new_worktrees
from perflab.automate.measurer import KernelFailed, measurer_for
from perflab.execution.vm import kernel
from perflab.jobs import atomic

pytestmark = pytest.mark.vm

K47, K50 = kernel.cached(kernel.DEFAULT_PACKAGE), kernel.cached(kernel.OTHER_PACKAGE)
needs_kernels = pytest.mark.skipif(
    shutil.which("qemu-system-x86_64") is None or not K47 or not K50,
    reason="needs qemu-system-x86_64 (Debian qemu-system-x86) and both kernels: python tools/fetch_kernel.py --both")

BUILD = """set -e
k=$(cat kernel.txt)
mkdir -p "$KBUILD_OUTPUT/arch/x86/boot"
echo "built $k in $PERFLAB_BUILD_DIR" >> "$KBUILD_OUTPUT/builds.log"
case "$k" in
  fail) echo "error: this commit does not build" >&2; exit 1 ;;
  garbage) echo "not a kernel" > "$KBUILD_OUTPUT/arch/x86/boot/bzImage" ;;
  *) cp "$k" "$KBUILD_OUTPUT/arch/x86/boot/bzImage" ;;
esac
"""
# c0 good ... c4 switches to 6.1.176 (the culprit, not the bad end c5); c2 does not build (git bisect's
# first midpoint with 5 candidates), so it is skipped and c3 (good) is measured next: two boots of steps.
LAYOUT = ["47", "47", "fail", "47", "50", "50"]
CULPRIT, BROKEN = 4, 2
# For the boot-failure test: a commit that builds garbage, then one that builds a good kernel.
BOOT_LAYOUT = ["47", "garbage", "50"]
METRIC = "will-it-scale.per_process_ops"


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


def _tree(tmp_path: Path, layout: list[str] = LAYOUT) -> tuple[Path, list[str]]:
    repo = tmp_path / "linux"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / "build.sh").write_text(BUILD)
    shas = []
    for i, what in enumerate(layout):
        (repo / "kernel.txt").write_text({"47": str(K47), "50": str(K50)}.get(what, what) + "\n")
        (repo / "n.txt").write_text(f"{i}\n")
        _git(repo, "add", "-A")
        _git(repo, "-c", "user.name=t", "-c", "user.email=t@example.org", "commit", "-qm", f"c{i}: {what}")
        shas.append(_git(repo, "rev-parse", "HEAD"))
    return repo, shas


def _job():
    return atomic("will-it-scale", {"test": "getppid1", "nr_task": 1, "duration": 0.3, "warmup_time": 0.1,
                                    "interval": 0.1}, runs=1)


@needs_kernels
def test_bisect_names_the_kernel_that_slowed_getppid_and_skips_the_one_that_does_not_build(tmp_path):
    from perflab.store import open_store

    repo, shas = _tree(tmp_path)
    status_before = _git(repo, "status", "--porcelain")
    store = open_store(str(tmp_path / "perflab.db"))
    said: list[str] = []
    # One run per end and per step: instruction-time is exact (2 per end for the ends' test).
    settings = bisect.Settings(threshold=0.002, ends_start=2, min_step=1, pairing="off")
    result = bisect.start(store, repo=str(repo), good=shas[0], bad=shas[-1], build_cmd="sh build.sh", job=_job(),
                          metric=METRIC, tag=None, settings=settings, kernel="arch/x86/boot/bzImage",
                          vm_mode="icount", say=said.append)
    assert result.culprit and result.culprit.sha == shas[CULPRIT], said
    rec = result.record
    assert shas[BROKEN] in rec.skips and "--build failed" in rec.skips[shas[BROKEN]].why, rec.skips
    # The record keeps what --resume needs: the image's path in the build output and the VM.
    saved = json.loads(Path(rec.path).read_text())
    assert saved["kernel"]["image"] == "arch/x86/boot/bzImage" and saved["kernel"]["vm"]["mode"] == "icount"
    assert "kernel" not in saved["job"]
    # Each run booted the image its commit built, in icount; the units say instruction-time.
    runs = store.find_runs(tag=rec.tag)
    assert runs and {r.commit for r in runs} <= set(shas)
    for r in runs:
        facts = r.environment if isinstance(r.environment, dict) else json.loads(r.environment)
        assert facts["vm_mode"] == "icount" and facts["kernel_path"].endswith("/bzImage")
        want = "6.1.0-50-amd64" if shas.index(r.commit) >= CULPRIT else "6.1.0-47-amd64"
        assert facts["kernel_release"] == want, (r.commit, facts["kernel_release"])
    assert {row.unit for row in store.samples([r.id for r in runs]) if row.metric == METRIC} == {"ops/s (icount)"}
    # The time split is said per measured commit; the user's tree is as it was, no worktree left.
    assert any(line.startswith("kernel ") and "boot" in line for line in said), said
    assert _git(repo, "status", "--porcelain") == status_before
    assert _git(repo, "worktree", "list").count("\n") == 0
    assert not list(Path(rec.repo).glob("../perflab-bisect-*"))


@needs_kernels
def test_a_kernel_that_does_not_boot_is_a_skip_with_its_console_tail(tmp_path):
    from perflab.store import open_store

    repo, shas = _tree(tmp_path, BOOT_LAYOUT)
    store = open_store(str(tmp_path / "perflab.db"))
    rec = bisect.Record(id="t", repo=str(repo), good=shas[0], bad=shas[-1], build="sh build.sh", job=_job(),
                        metric=METRIC, tag="t", kernel={"image": "arch/x86/boot/bzImage",
                                                        "vm": {"mode": "tcg", "cpus": 1, "memory": 256,
                                                               "qemu_args": []}})
    trees = new_worktrees(repo, "t")
    try:
        measurer = measurer_for(store, measurer_spec(rec, trees), lambda _m: None)
        trees.add("step", shas[1])
        with pytest.raises(KernelFailed) as failed:
            measurer.measure(shas[1], [_job().with_(tag="t")], slot="step")
        assert f"kernel of {shas[1][:12]} did not boot: QEMU could not boot kernel bzImage" in str(failed.value)
        assert "\n" not in str(failed.value)
        # The build output directory is kept between builds: the second build ran in the same one.
        trees.paths["step"] and _git(trees.paths["step"], "checkout", "-q", "--detach", shas[2])
        measurer.measure(shas[2], [_job().with_(tag="t", runs=1)], slot="step")
        log = (trees.base / "kernel-build" / "builds.log").read_text().splitlines()
        assert len(log) == 2 and all(line.endswith(str(trees.base / "kernel-build")) for line in log)
    finally:
        trees.close()
    assert not trees.base.exists()


def test_kernel_options_are_refused_in_one_line_before_anything_is_built(cli, tmp_path):
    repo = tmp_path / "r"
    repo.mkdir()
    _git(repo, "init", "-q")
    for i in range(2):
        (repo / "f").write_text(str(i))
        _git(repo, "add", "-A")
        _git(repo, "-c", "user.name=t", "-c", "user.email=t@example.org", "commit", "-qm", f"c{i}")
    job = tmp_path / "j.yaml"
    job.write_text("benchmark: will-it-scale\ntest: getppid1\nnr_task: 1\n")
    base = ["bisect", "--repo", repo, "--good", "HEAD~1", "--bad", "HEAD", "--build", "true", "--job", job,
            "--metric", METRIC]
    assert_one_line_error(cli(*base, "--kernel", "/abs/bzImage", check=False), "--kernel /abs/bzImage", "relative")
    assert_one_line_error(cli(*base, "--vm", "icount", check=False), "--vm icount", "--kernel IMAGE")
    kernbench = tmp_path / "k.yaml"      # a family the guest cannot run (cmd can: docs/vm.md)
    kernbench.write_text("benchmark: kernbench\njobs: half\n")
    proc = cli(*base[:-4], "--job", kernbench, "--metric", "kernbench.elapsed", "--kernel", "arch/x86/boot/bzImage",
               check=False)
    assert_one_line_error(proc, "kernbench cannot run in a VM guest")
    assert not (tmp_path / "perflab.db.bisect").exists() or not list((tmp_path / "perflab.db.bisect").glob("*.json"))
