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
