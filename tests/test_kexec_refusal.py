"""What perflab refuses before it kexecs a machine (execution/targets/kexec.py): a machine not
declared kexec-capable, the machine perflab runs on, a bad [machine.NAME] kexec key."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import assert_one_line_error
from perflab.core.errors import PerflabError
from perflab.execution.targets import kexec
from perflab.execution.targets.ssh import Machine


def _ids() -> tuple[str, str]:
    machine_id = Path("/etc/machine-id").read_text().strip() if Path("/etc/machine-id").exists() else ""
    return Path("/proc/sys/kernel/random/boot_id").read_text().strip(), machine_id


def test_a_machine_not_declared_kexec_capable_is_refused_before_anything_runs(cli, tmp_path):
    config = tmp_path / "perflab.toml"
    config.write_text('[machine.plain]\nssh = "perf@plain.invalid"\nconnect_timeout = 2\n')
    proc = cli("run", "will-it-scale", "--test", "getppid1", "--on", "plain", "--kernel", "debian:6.1.0-50-amd64",
               check=False, env={"PERFLAB_CONFIG": str(config)})
    assert_one_line_error(proc, "plain is not declared kexec-capable")
    assert not cli.db.exists() or cli.sql("SELECT count(*) FROM run") == [(0,)]


def test_the_machine_perflab_runs_on_is_never_kexeced():
    boot_id, machine_id = _ids()
    here = Machine("self", "root@127.0.0.1", 22)
    far = {"boot_id": boot_id, "machine_id": "other", "release": "x", "uid": "0", "cmdline": ""}
    with pytest.raises(PerflabError, match="is the machine perflab runs on"):
        kexec.refuse_this_machine(here, far)
    if machine_id:
        with pytest.raises(PerflabError, match="is the machine perflab runs on"):
            kexec.refuse_this_machine(here, {**far, "boot_id": "another-boot", "machine_id": machine_id})
    # Ids that cannot be read: not told apart from this machine, refused.
    with pytest.raises(PerflabError, match="cannot be read"):
        kexec.refuse_this_machine(here, {**far, "boot_id": "", "machine_id": ""})
    # Another machine (the simulated box behind 127.0.0.1:PORT has its own boot_id): not refused.
    kexec.refuse_this_machine(here, {**far, "boot_id": "0f0e0d0c-another-boot", "machine_id": "another"})


@pytest.mark.parametrize("line, needle", [('kexec = "yes"', "kexec = 'yes': expected true or false"),
                                          ("boot_timeout = 0", "boot_timeout = 0: expected seconds"),
                                          ('power_cycle = ""', "power_cycle = '': expected a shell command")])
def test_a_bad_kexec_key_is_one_line_naming_file_and_key(cli, tmp_path, line, needle):
    config = tmp_path / "perflab.toml"
    config.write_text(f'[machine.box]\nssh = "box.invalid"\n{line}\n')
    proc = cli("run", "will-it-scale", "--test", "getppid1", "--on", "box", check=False,
               env={"PERFLAB_CONFIG": str(config)})
    assert_one_line_error(proc, str(config), needle)


def test_a_stored_job_keeps_its_machine_kernel_and_keep_kernel():
    from perflab.execution.targets.ssh import Ssh
    from perflab.jobs.job import AtomicJob

    stored = {"benchmark": "will-it-scale", "params": {"test": "getppid1"}, "kernel": "debian:6.1.0-50-amd64",
              "on": "box1", "keep_kernel": True}
    job = AtomicJob.from_dict(stored)
    assert isinstance(job.target, Ssh)
    assert (job.target.on, job.target.kernel, job.target.keep_kernel) == ("box1", "debian:6.1.0-50-amd64", True)
    assert job.to_dict() == stored
    # The kernel is part of what keeps its figures apart; a job on another kernel opens another place.
    assert job.target.params({})["kernel"] == "debian:6.1.0-50-amd64"
    other = AtomicJob.from_dict({**stored, "kernel": "debian:6.1.0-47-amd64"})
    assert other.target.share_key(frozenset(), {}) != job.target.share_key(frozenset(), {})


def _recipe_tree(tmp_path: Path) -> Path:
    """A git tree that a recipe may name (nothing is built from it here)."""
    import subprocess

    tree = tmp_path / "linux"
    tree.mkdir()
    (tree / "Makefile").write_text("all:\n")
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-qm", "a"]):
        subprocess.run(["git", "-C", str(tree), *args], check=True, env={**__import__("os").environ, **env})
    return tree


def test_a_recipe_on_a_machine_not_declared_kexec_capable_is_refused_before_anything_is_built(cli, tmp_path):
    tree = _recipe_tree(tmp_path)
    spec = tmp_path / "box.yaml"
    spec.write_text(f"tree: {tree}\nconfig: defconfig\nname: -box\n")
    config = tmp_path / "perflab.toml"
    config.write_text('[machine.plain]\nssh = "perf@plain.invalid"\nconnect_timeout = 2\n')
    cache = tmp_path / "cache"      # its own: the session's shared cache holds other tests' builds
    proc = cli("run", "will-it-scale", "--test", "getppid1", "--on", "plain", "--kernel", spec, check=False,
               env={"PERFLAB_CONFIG": str(config), "XDG_CACHE_HOME": str(cache)})
    assert_one_line_error(proc, "plain is not declared kexec-capable")
    assert not (cache / "perflab" / "kernel-builds").exists()


def test_a_recipe_without_dpkg_buildpackage_is_refused_in_one_line(cli, tmp_path):
    """A recipe goes on a box as a Debian package (make bindeb-pkg): without dpkg-dev's tools
    perflab says which is missing before anything runs."""
    import os
    import shutil

    tree = _recipe_tree(tmp_path)
    spec = tmp_path / "box.yaml"
    spec.write_text(f"tree: {tree}\nconfig: defconfig\n")
    config = tmp_path / "perflab.toml"
    config.write_text('[machine.box]\nssh = "root@box.invalid"\nconnect_timeout = 2\nkexec = true\n')
    # A PATH with every program but dpkg-dev's (each a link to the real one).
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for d in os.environ["PATH"].split(os.pathsep):
        for f in Path(d).glob("*") if Path(d).is_dir() else ():
            if f.name not in ("dpkg-buildpackage", "dpkg-architecture") and not (bin_dir / f.name).exists():
                with __import__("contextlib").suppress(OSError):
                    os.symlink(f, bin_dir / f.name)
    assert shutil.which("dpkg-buildpackage", path=str(bin_dir)) is None
    proc = cli("run", "will-it-scale", "--test", "getppid1", "--on", "box", "--kernel", spec, check=False,
               env={"PERFLAB_CONFIG": str(config), "PATH": str(bin_dir)})
    assert_one_line_error(proc, "needs dpkg-buildpackage (Debian package dpkg-dev)")


def test_a_stored_job_keeps_a_recipe_as_its_kernel_and_its_build_name_apart(tmp_path):
    from perflab.execution.targets.ssh import Ssh
    from perflab.execution.vm import recipe
    from perflab.jobs.job import AtomicJob

    tree = _recipe_tree(tmp_path)
    kept = kexec.check_kernel({"tree": str(tree), "config": "defconfig", "name": "-box"}, "kernel")
    assert kept == {"tree": str(tree), "config": "defconfig", "name": "-box"}
    stored = {"benchmark": "will-it-scale", "params": {"test": "getppid1"}, "kernel": kept, "on": "box1"}
    job = AtomicJob.from_dict(stored)
    assert isinstance(job.target, Ssh) and job.target.kernel == kept
    assert job.to_dict() == stored
    assert job.target.params({})["kernel_build"] == "-box"
    unnamed = AtomicJob.from_dict({**stored, "kernel": {"tree": str(tree), "config": "defconfig"}})
    assert unnamed.target.params({})["kernel_build"] == recipe.identity(recipe.recipe_of(unnamed.target.kernel))[2]
    assert unnamed.target.share_key(frozenset(), {}) != job.target.share_key(frozenset(), {})
    # A boot option of a recipe is the guest's: on a machine the kernel boots with the machine's own.
    with pytest.raises(Exception, match="kexec --reuse-cmdline"):
        kexec.check_kernel({"tree": str(tree), "cmdline": "quiet"}, "kernel")


def test_a_recipes_package_is_an_entry_of_its_own_keyed_by_the_form(tmp_path):
    from perflab.execution.vm import recipe

    tree = _recipe_tree(tmp_path)
    key = recipe.identity(recipe.recipe_of({"tree": str(tree)}))[2]
    assert recipe.package_key(key) != key
    assert recipe.package_version("6.1.192-box", key) == f"6.1.192-box-perflab.{key}"


def test_the_console_text_is_this_boots_only():
    before = "".join(f"[    {i}.0] an earlier boot's line {i}\n" for i in range(300))
    after = before + "[    0.0] Linux version 6.1.0-50\nKernel panic - not syncing: VFS: Unable to mount root\n"
    assert kexec.console_since(before, after) == ("[    0.0] Linux version 6.1.0-50\n"
                                                  "Kernel panic - not syncing: VFS: Unable to mount root\n")
    # The console command's output is a tail that moved on (tail -c N): found by the end of the text before.
    moved = after[len(after) // 2:]
    assert kexec.console_since(before, moved).startswith("[    0.0] Linux version 6.1.0-50\n")
    # Nothing said before, or nothing in common: all of it, its last CONSOLE_BYTES.
    assert kexec.console_since("", "boot\n") == "boot\n"
    assert kexec.console_since("other text", "x" * 9000) == "x" * kexec.CONSOLE_BYTES


# -- a kernel bisection on a box (perflab bisect/series --kernel IMAGE --on BOX) ---------------

def _kernel_tree(tmp_path: Path, build: str = "") -> tuple[Path, Path]:
    """A two-commit "kernel tree" whose build leaves a mark (to show nothing was built) and runs
    `build` (none: no image)."""
    import os
    import subprocess

    tree = tmp_path / "linux"
    tree.mkdir()
    mark = tmp_path / "built"
    (tree / "build.sh").write_text(f"touch {mark}\n{build}")
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "a"]):
        subprocess.run(["git", "-C", str(tree), *args], check=True, env=env)
    (tree / "n.txt").write_text("1\n")
    subprocess.run(["git", "-C", str(tree), "add", "-A"], check=True, env=env)
    subprocess.run(["git", "-C", str(tree), "commit", "-qm", "b"], check=True, env=env)
    return tree, mark


@pytest.mark.parametrize("extra, needle", [
    (["--on", "plain"], "plain is not declared kexec-capable"),
    (["--on", "kbox", "--vm", "tcg"], "--vm tcg: with --on kbox each commit's kernel is kexec'ed on the machine"),
])
def test_a_kernel_bisection_on_a_machine_is_refused_before_anything_is_built(cli, tmp_path, extra, needle):
    """What remains refused of `bisect --kernel IMAGE --on MACHINE`: a machine not declared
    kexec-capable, and a VM mode (the kernel boots on the machine); one line, nothing built."""
    job = tmp_path / "wis.yaml"
    # Any job (not only cmd): a kernel bisection's commits change the kernel, not the program.
    job.write_text("benchmark: will-it-scale\ntest: getppid1\n")
    _refused_before_any_build(cli, tmp_path, needle, lambda tree: (
        "bisect", "--repo", tree, "--good", "HEAD~1", "--bad", "HEAD", "--build", "sh build.sh", "--kernel",
        "arch/x86/boot/bzImage", "--job", job, "--metric", "will-it-scale.per_process_ops", *extra))


def _refused_before_any_build(cli, tmp_path: Path, needle: str, command) -> None:
    """`command(tree)` over the two-commit tree, machines plain and kbox (kexec-capable) configured:
    refused in one line naming `needle`, nothing built, no run stored."""
    tree, mark = _kernel_tree(tmp_path)
    config = tmp_path / "perflab.toml"
    config.write_text('[machine.plain]\nssh = "perf@plain.invalid"\nconnect_timeout = 2\n'
                      '[machine.kbox]\nssh = "root@kbox.invalid"\nconnect_timeout = 2\nkexec = true\n')
    proc = cli(*command(tree), check=False, env={"PERFLAB_CONFIG": str(config)})
    assert_one_line_error(proc, needle)
    assert not mark.exists()
    assert not cli.db.exists() or cli.sql("SELECT count(*) FROM run") == [(0,)]


@pytest.mark.parametrize("extra, needle", [
    (["--on", "plain"], "plain is not declared kexec-capable"),
    (["--on", "kbox", "--vm", "tcg"], "--vm tcg: with --on kbox each commit's kernel is kexec'ed on the machine"),
    (["--on", "kbox", "--box", "b1"], "--on with --box: a lab box's worker drives its own machine"),
    (["--job", "GUEST"], "the jobs run in different places (a guest, kbox)"),
])
def test_the_robot_with_a_kernel_on_a_machine_refuses_what_cannot_work_before_anything_is_built(
        cli, tmp_path, extra, needle):
    """`robot --kernel IMAGE --on BOX` (or a job file's `on:`): what cannot work is one line before
    the first build: a machine not kexec-capable, a VM mode, a lab box, jobs in two places."""
    on_file = tmp_path / "on.yaml"
    on_file.write_text("benchmark: will-it-scale\ntest: getppid1\non: kbox\n")
    guest = tmp_path / "guest.yaml"
    guest.write_text("benchmark: will-it-scale\ntest: getppid1\n")
    extra = [str(guest) if x == "GUEST" else x for x in extra]
    job = guest if "--on" in extra else on_file
    _refused_before_any_build(cli, tmp_path, needle, lambda tree: (
        "robot", "--repo", tree, "--job", job, "--build", "sh build.sh", "--kernel", "arch/x86/boot/bzImage",
        "--once", *extra))


def test_the_robots_kernel_pass_on_a_machine_is_the_bisections_measurer(tmp_path, monkeypatch):
    """The plumbing of `robot --kernel IMAGE --on kbox`: the pass's Measurer is the LocalMeasurer bisect
    makes for `--kernel --on` (KernelBuilds here, each commit's image kexec'ed on kbox), and the
    culprit's bisection is started with the kernel and the job still on kbox. The robot's pass is
    driven with a scripted Measurer (the product path's Measurer is checked, not used)."""
    from perflab.automate import bisect, robot
    from perflab.automate.measurer import KernelSpec, LocalMeasurer, Measured
    from perflab.jobs.job import AtomicJob
    from perflab.store import open_store
    from test_robot import make_repo

    config = tmp_path / "perflab.toml"
    config.write_text('[machine.kbox]\nssh = "root@kbox.invalid"\nconnect_timeout = 2\nkexec = true\n')
    monkeypatch.setenv("PERFLAB_CONFIG", str(config))
    repo = tmp_path / "linux"
    shas = make_repo(repo, commits=3)
    store = open_store(str(tmp_path / "perflab.db"))
    job = AtomicJob.from_dict({"benchmark": "cmd", "params": {"command": "uname -r", "metrics": [
        {"name": "kernel.abi", "pattern": "^6\\.1\\.0-(\\d+)-amd64", "direction": -1}]}, "on": "kbox", "runs": 3})
    spec = robot._kernel("arch/x86/boot/bzImage", None, [job])
    assert spec == KernelSpec("arch/x86/boot/bzImage", {}, on="kbox")
    made = robot.make_measurer(store, repo, "sh build.sh", None, None, lambda _m: None, spec)
    try:
        assert isinstance(made, LocalMeasurer) and made.kernel == spec and made.place == " on kbox (kexec)"
        assert made.builds.image == "arch/x86/boot/bzImage" and made.builds.build_cmd == "sh build.sh"
    finally:
        made.close()

    class Scripted:
        """Each commit's release as its runs on the box would give it: 47 at the first commit, then 50."""
        place = " on kbox (kexec)"
        kernel = spec

        def measure(self, commit, jobs, *, slot=""):
            out = []
            for j in jobs:
                value = 47.0 if commit == shas[0] else 50.0
                run = store.create_run(box="kbox", environment={}, benchmark="cmd", name="uname", tag=j.tag,
                                       commit=commit, params={"on": "kbox", "kernel": "arch/x86/boot/bzImage"},
                                       job=j.to_dict())
                from perflab.core.model import LOWER_IS_BETTER, Sample

                for rep in range(j.runs or 1):
                    store.add_samples(run, rep, [Sample("kernel.abi", value, "", LOWER_IS_BETTER)])
                store.finish_run(run, "finished")
                out.append(Measured("done", None, [run], {"kernel.abi": [value] * (j.runs or 1)}, j.runs or 1))
            return out

        def summary(self, measured):
            return "scripted"

    started = {}

    def bisect_start(store, **kw):
        started.update(kw)
        raise bisect.BisectError("stopped here: the test checks what the bisection was given")

    monkeypatch.setattr(bisect, "start", bisect_start)
    done = robot.run_once(store, repo=str(repo), branch=None, jobs=[job], build_cmd="sh build.sh", name="box",
                          start=shas[0], measurer=Scripted(), kernel="arch/x86/boot/bzImage", revert=False)
    assert done.tested == [shas[0], shas[2]] and done.findings
    assert started["kernel"] == "arch/x86/boot/bzImage" and started["vm_mode"] is None
    assert started["job"].target.on == "kbox" and started["build_cmd"] == "sh build.sh"


def test_a_kernel_bisections_steps_on_a_machine_kexec_each_commits_image(tmp_path, monkeypatch):
    """The step plan: each commit's image (its own file) is the machine's kernel under test, one
    switch each (a place of its own), all under one parameter `kernel` (the image's path in the build
    output: the commits' runs compare); the record keeps the machine; no VM mode, no counting there."""
    from perflab import jobs
    from perflab.automate import change_kind
    from perflab.automate.measurer import KernelSpec, LocalMeasurer, kernel_spec
    from perflab.execution.targets.ssh import Ssh
    from perflab.jobs import atomic

    config = tmp_path / "perflab.toml"
    config.write_text('[machine.kbox]\nssh = "root@kbox.invalid"\nconnect_timeout = 2\nkexec = true\n')
    monkeypatch.setenv("PERFLAB_CONFIG", str(config))
    job = jobs.placed(atomic("will-it-scale", {"test": "getppid1", "nr_task": 1}), Ssh(on="kbox", keep_kernel=True))
    spec = kernel_spec("arch/x86/boot/bzImage", None, job)
    assert spec == KernelSpec("arch/x86/boot/bzImage", {}, on="kbox", keep=True)
    assert KernelSpec(**spec.to_dict()) == spec          # the record's form: a resume kexecs there too
    assert KernelSpec(**KernelSpec("bzImage", {"mode": "tcg"}).to_dict()).on == ""
    targets = [spec.target(tmp_path / "kernel-images" / sha / "bzImage") for sha in ("c0", "c1")]
    for t, sha in zip(targets, ("c0", "c1")):
        assert isinstance(t, Ssh) and t.on == "kbox" and t.keep_kernel
        assert t.kernel == str(tmp_path / "kernel-images" / sha / "bzImage")
        assert t.params({}) == {"on": "kbox", "kernel": "arch/x86/boot/bzImage"}
    assert targets[0].share_key(frozenset(), {}) != targets[1].share_key(frozenset(), {})
    with pytest.raises(PerflabError, match="the kernels run on kbox, not in a VM"):
        spec.in_mode("icount")
    measurer = LocalMeasurer(None, None, kernel=spec)
    assert measurer.place == " on kbox (kexec)"
    assert change_kind.counting(measurer, job, "will-it-scale.per_process_ops").startswith("the kernels ran on kbox")
    # A job file's own kernel on the machine is not the commits': refused.
    with pytest.raises(Exception, match="the job names its own kernel"):
        kernel_spec("arch/x86/boot/bzImage", None, job.with_(kernel="debian:6.1.0-50-amd64"))
    # The robot kexecs each commit's kernel there too (the same spec, so the same Measurer as bisect's);
    # its jobs in two places (a guest and the machine) are refused: each commit's kernel boots in one.
    from perflab.automate import robot

    assert robot._kernel("arch/x86/boot/bzImage", None, [job, job]) == spec
    in_guest = atomic("will-it-scale", {"test": "getppid1", "nr_task": 1})
    with pytest.raises(PerflabError, match=r"the jobs run in different places \(a guest, kbox\)"):
        robot._kernel("arch/x86/boot/bzImage", None, [in_guest, job])


def test_an_image_of_the_default_release_is_told_apart_by_uname_v():
    """An image of the release the machine runs by default (a kernel tree's build) is kexec'ed all the
    same; the machine is on it only when `uname -v` says the image's build too."""
    from perflab.execution.vm import kernel as kernels

    image = kernels.cached(kernels.OTHER_PACKAGE)
    if not image:
        pytest.skip(f"no cached Debian 6.1.0-50 kernel in {kernels.cache_dir()} (tools/fetch_kernel.py --both)")
    what = kexec.to_install(str(image))
    assert what.release == "6.1.0-50-amd64" and what.version.startswith("#1 SMP PREEMPT_DYNAMIC Debian 6.1.176")
    far = {"release": "6.1.0-50-amd64", "version": what.version}
    assert kexec.came_up_as_asked(far, what)
    assert not kexec.came_up_as_asked({**far, "version": "#1 SMP PREEMPT_DYNAMIC Debian 6.1.170-3"}, what)
    assert not kexec.came_up_as_asked({**far, "release": "6.1.0-47-amd64"}, what)
