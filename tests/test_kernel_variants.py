"""Kernel variants a job names (issue 36): Debian's kernels by release, the boot command line,
and a list of them as an axis of the matrix. Pure checks first; then one guest, skipped with the
reason when QEMU or the cached Debian kernel is absent."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest

from conftest import assert_one_line_error
from perflab.execution.vm import kernel
from perflab.jobs import JobError, expand_atomic
from perflab.jobs.job import AtomicJob

KERNEL = os.environ.get("PERFLAB_TEST_KERNEL") or kernel.cached()
needs_vm = pytest.mark.skipif(
    shutil.which("qemu-system-x86_64") is None or not KERNEL or not Path(KERNEL).is_file(),
    reason="needs qemu-system-x86_64 (Debian qemu-system-x86) and a kernel: python tools/fetch_kernel.py")


def test_debian_releases_name_their_packages():
    assert kernel.debian_package("debian:6.1.0-56-amd64") == "linux-image-6.1.0-56-amd64-unsigned"
    assert kernel.debian_package("debian:6.1.0-56-rt-amd64") == "linux-image-6.1.0-56-rt-amd64-unsigned"
    assert kernel.debian_package("debian:6.12.117+deb12-amd64") == "linux-image-6.12.117+deb12-amd64-unsigned"
    for bad in ("debian:", "debian:latest", "debian:6.1.0-56", "debian:6.1.0-56-amd64; rm -rf /", "debian:../x-amd64"):
        with pytest.raises(Exception, match="expected debian:RELEASE"):
            kernel.debian_package(bad)


def test_a_list_of_kernels_is_an_axis_and_the_command_line_a_variant(tmp_path):
    image = tmp_path / "bzImage"
    image.write_bytes(b"x")
    jobs = expand_atomic({"benchmark": "will-it-scale", "test": ["getppid1", "brk1"], "vm": {"mode": "icount"},
                          "kernel": [str(image), {"image": "debian:6.1.0-56-amd64", "cmdline": " mitigations=off  nosmt "},
                                     "debian:6.1.0-56-rt-amd64"]}, "j.yaml")
    assert len(jobs) == 6
    kernels = [(j.target.kernel, j.target.cmdline) for j in jobs]
    assert kernels[::2] == [(str(image), ""), ("debian:6.1.0-56-amd64", "mitigations=off nosmt"),
                            ("debian:6.1.0-56-rt-amd64", "")]
    stored = jobs[2].to_dict()
    assert stored["kernel"] == {"image": "debian:6.1.0-56-amd64", "cmdline": "mitigations=off nosmt"}
    assert AtomicJob.from_dict(stored).to_dict() == stored
    # the command line keeps a run's figures apart and is selectable (compare cmdline=...)
    params = jobs[2].target.params({"test": "getppid1"})
    assert params["cmdline"] == "mitigations=off nosmt" and "cmdline" not in jobs[0].target.params({})


@pytest.mark.parametrize("kernel_key, needle", [
    ({"image": "/k", "ref": "v6.1"}, "key 'kernel.ref' is unknown; valid: image, cmdline"),
    ({"tree": "/k", "image": "/k"}, "key 'kernel.image' is unknown; a kernel recipe takes tree, ref"),
    ({"image": "/k", "cmdline": "a\nb"}, "expected one line of kernel options"),
    ({"cmdline": "quiet"}, "expected the path of a kernel image"),
    ("debian:6.1", "expected debian:RELEASE"),
    ([], "an empty list gives no job"),
])
def test_bad_kernel_keys_are_one_line_job_errors(kernel_key, needle):
    with pytest.raises(JobError, match=needle) as e:
        expand_atomic({"benchmark": "lmbench", "kernel": kernel_key}, "j.yaml")
    assert "\n" not in str(e.value)


def test_kernel_fetch_refuses_what_is_not_a_debian_release(cli):
    assert_one_line_error(cli("kernel", "fetch", "6.1.0-56-amd64", check=False), "expected debian:RELEASE")
    assert_one_line_error(cli("kernel", "fetch", "debian:6.1.0-56", check=False), "expected debian:RELEASE")
    assert_one_line_error(cli("kernel", "prune", check=False), "name the kernels to remove")
    assert re.search(r"^\d+ kernels?, [\d.]+ MiB in ", cli("kernel", "list").stdout, re.MULTILINE)


@pytest.mark.vm
@needs_vm
def test_a_debian_kernel_by_release_boots_with_its_command_line(cli, tmp_path):
    """debian:RELEASE finds the cached kernel (no download); the command line reaches QEMU's
    -append, is the run's parameter and selects it in compare."""
    release = kernel._release(Path(KERNEL).parent.parent.name)
    if Path(KERNEL).resolve() != kernel.cached(f"linux-image-{release}-unsigned"):
        pytest.skip("the test kernel is not a cached Debian package")
    # The perflab under test finds the kernel where this session fetched it (no second download).
    kernels = Path(cli.env["XDG_CACHE_HOME"]) / "perflab" / "kernels"
    if not kernels.exists():
        kernels.parent.mkdir(parents=True, exist_ok=True)
        kernels.symlink_to(kernel.cache_dir(), target_is_directory=True)
    job = tmp_path / "wis.yaml"
    job.write_text(f"benchmark: will-it-scale\ntest: getppid1\nduration: 0.3\nwarmup_time: 0.1\ninterval: 0.1\n"
                   f"vm: {{mode: tcg}}\nkernel:\n  - debian:{release}\n"
                   f"  - {{image: debian:{release}, cmdline: perflab.variant=1}}\n")
    cli("run", job, timeout=600)
    ((p1,),), ((p2,),) = cli.sql("SELECT params FROM run WHERE id = 1"), cli.sql("SELECT params FROM run WHERE id = 2")
    assert "cmdline" not in json.loads(p1) and json.loads(p2)["cmdline"] == "perflab.variant=1"
    diff = cli("env", "--diff", "1", "2").stdout
    assert "kernel_cmdline" in diff and "perflab.variant=1" in diff
    out = cli("compare", "cmdline=perflab.variant=1", "1").stdout
    assert "will-it-scale.per_process_ops" in out


# -- recipes: perflab builds the kernel (orchestration on a small tree with kbuild's interface;
#    a real linux-source-6.1 build is tools/bench/kernel_variants.py --builds) ------------------

KBUILD = """\
O ?= .
olddefconfig tinyconfig defconfig:
\t@mkdir -p $(O) && touch $(O)/.config && echo CONFIG_OLD=y >> $(O)/.config
bzImage:
\t@if grep -q broken version.txt; then echo "version.txt: error: it is broken" >&2; exit 2; fi
\t@mkdir -p $(O)/arch/x86/boot $(O)/include/config
\t@echo "6.1.0$(LOCALVERSION)" > $(O)/include/config/kernel.release
\t@printf 'image %s kcflags=%s cc=%s config=%s\\n' "$$(cat version.txt)" "$(KCFLAGS)" "$(CC)" "$$(tr '\\n' , < $(O)/.config)" > $(O)/arch/x86/boot/bzImage
\t@echo built >> $(O)/builds.txt
\t@printf 'ffffffff81000000 T _stext\\n' > $(O)/System.map
"""


def _tree(path: Path) -> Path:
    import subprocess

    path.mkdir()
    (path / "Makefile").write_text(KBUILD)
    (path / "version.txt").write_text("one\n")
    for args in (["init", "-q", "-b", "main"], ["add", "-A"],
                 ["-c", "user.name=t", "-c", "user.email=t@example.org", "commit", "-qm", "one"]):
        subprocess.run(["git", "-C", str(path), *args], check=True, capture_output=True)
    return path


def test_a_recipe_is_built_once_patched_configured_and_named(tmp_path, monkeypatch):
    import subprocess

    from perflab.core.errors import PerflabError
    from perflab.execution.vm import recipe

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    tree = _tree(tmp_path / "linux")
    patch = tmp_path / "two.patch"
    subprocess.run(["git", "-C", str(tree), "checkout", "-qb", "two"], check=True)
    (tree / "version.txt").write_text("two\n")
    patch.write_text(subprocess.run(["git", "-C", str(tree), "diff"], capture_output=True, text=True).stdout)
    subprocess.run(["git", "-C", str(tree), "checkout", "-q", "--", "."], check=True)
    subprocess.run(["git", "-C", str(tree), "checkout", "-q", "main"], check=True)
    frag = tmp_path / "debug.config"
    frag.write_text("CONFIG_DEBUG=y\n")
    r = recipe.recipe_of({"tree": str(tree), "config": "defconfig", "fragments": [str(frag), {"CONFIG_PREEMPT": True}],
                          "kcflags": "-Os", "name": "-t-Os", "patches": [str(patch)]})
    built = recipe.build(r, jobs=1)
    text = built.image.read_text()
    assert "image two" in text and "kcflags=-Os" in text and "cc=gcc" in text          # patched, flags, compiler
    assert "CONFIG_DEBUG=y" in text and "CONFIG_PREEMPT=y" in text                       # fragments merged
    assert built.facts["kernel_build_release"] == "6.1.0-t-Os" and built.facts["kernel_compiler"].startswith("gcc")
    assert "git -C" in built.facts["kernel_build_commands"] and "KCFLAGS=-Os" in built.facts["kernel_build_commands"]
    # the user's tree is untouched: same commit, clean, no worktree of perflab's
    assert subprocess.run(["git", "-C", str(tree), "status", "--porcelain"], capture_output=True, text=True).stdout == ""
    assert len(subprocess.run(["git", "-C", str(tree), "worktree", "list"], capture_output=True, text=True).stdout.splitlines()) == 1
    # asked again: not built again
    again = recipe.build(r, jobs=1)
    assert again.image == built.image
    outs = list((tmp_path / "cache" / "perflab" / "kernel-builds").glob("out-*/builds.txt"))
    assert [p.read_text().count("built") for p in outs] == [1]
    # a patch that does not apply, and a build that fails: one line each, nothing cached
    bad = tmp_path / "bad.patch"
    bad.write_text(patch.read_text().replace("-one", "-zero"))
    with pytest.raises(PerflabError, match=r"patch .*bad.patch does not apply to [0-9a-f]{12}"):
        recipe.build(recipe.recipe_of({"tree": str(tree), "patches": [str(bad)], "config": "defconfig"}), jobs=1)
    (tree / "version.txt").write_text("broken\n")
    subprocess.run(["git", "-C", str(tree), "-c", "user.name=t", "-c", "user.email=t@example.org", "commit", "-qam",
                    "broken"], check=True)
    with pytest.raises(PerflabError, match=r"kernel build of .* failed \(bzImage\): .*it is broken") as e:
        recipe.build(recipe.recipe_of({"tree": str(tree), "config": "defconfig"}), jobs=1)
    assert "\n" not in str(e.value)


def test_a_recipe_in_a_job_is_an_axis_per_listed_value(tmp_path):
    tree = _tree(tmp_path / "linux")
    jobs = expand_atomic({"benchmark": "will-it-scale", "test": "getppid1",
                          "kernel": {"tree": str(tree), "cc": ["gcc", "cc"], "kcflags": ["", "-Os"],
                                     "cmdline": "quiet"}}, "j.yaml")
    assert len(jobs) == 4
    assert {(j.target.recipe.get("cc", "gcc"), j.target.recipe.get("kcflags", "")) for j in jobs} == \
        {("gcc", ""), ("gcc", "-Os"), ("cc", ""), ("cc", "-Os")}
    stored = jobs[1].to_dict()
    assert stored["kernel"]["tree"] == str(tree) and stored["kernel"]["cmdline"] == "quiet"
    assert AtomicJob.from_dict(stored).to_dict() == stored
    with pytest.raises(JobError, match="key 'kernel.name' = 'a b'"):
        expand_atomic({"benchmark": "lmbench", "kernel": {"tree": str(tree), "name": "a b"}}, "j.yaml")
    with pytest.raises(JobError, match="key 'kernel.config' = 'no-such.cfg': no such file"):
        expand_atomic({"benchmark": "lmbench", "kernel": {"tree": str(tree), "config": "no-such.cfg"}}, "j.yaml")
    with pytest.raises(JobError, match="'DEBUG' is not a CONFIG_ option"):
        expand_atomic({"benchmark": "lmbench", "kernel": {"tree": str(tree), "fragments": [{"DEBUG": "y"}]}}, "j.yaml")


def test_kernel_build_prints_the_image_and_list_and_prune_show_the_builds(cli, tmp_path):
    tree = _tree(tmp_path / "linux")
    recipe_file = tmp_path / "r.yaml"
    recipe_file.write_text(f"tree: {tree}\nconfig: tinyconfig\nname: -cli\n")
    out = cli("kernel", "build", recipe_file).stdout
    assert out.startswith("6.1.0-cli  ") and out.strip().endswith("/bzImage")
    assert "6.1.0-cli" in cli("kernel", "list").stdout
    assert "MiB freed (builds)" in cli("kernel", "prune", "--builds").stdout
    assert "6.1.0-cli" not in cli("kernel", "list").stdout
    recipe_file.write_text(f"tree: {tree}\nkcflags: [a\n")
    assert_one_line_error(cli("kernel", "build", recipe_file, check=False), f"{recipe_file}:3: expected")
    recipe_file.write_text(f"tree: {tmp_path}\n")
    assert_one_line_error(cli("kernel", "build", recipe_file, check=False), "is not a git repository")


def test_a_series_recipe_is_one_build_command_run_at_each_commit(tmp_path):
    """`perflab series --recipe`: the recipe's config, fragments, compiler and flags as the build
    command of each commit, into the one $KBUILD_OUTPUT; the tree, commits and patches are the series'."""
    import os
    import subprocess

    from perflab.core.errors import UsageProblem
    from perflab.execution.vm import recipe

    tree = _tree(tmp_path / "linux")
    spec = tmp_path / "recipe.yaml"
    spec.write_text("config: defconfig\nfragments: [{CONFIG_PREEMPT: y}]\nkcflags: -Os\nname: -series\n")
    command = recipe.build_command(recipe.series_recipe(str(spec), str(tree)), jobs=1)
    out = tmp_path / "out"
    env = dict(os.environ, KBUILD_OUTPUT=str(out))
    for version in ("one", "two"):
        (tree / "version.txt").write_text(version + "\n")
        subprocess.run(["/bin/sh", "-c", command], cwd=tree, env=env, check=True, capture_output=True)
        image = (out / "arch/x86/boot/bzImage").read_text()
        assert f"image {version}" in image and "kcflags=-Os" in image and "CONFIG_PREEMPT=y" in image, image
    # the config was made once (the second commit's build kept it), and named by LOCALVERSION
    assert (out / ".config").read_text().count("CONFIG_PREEMPT=y") == 1
    assert (out / "include/config/kernel.release").read_text().strip() == "6.1.0-series"
    for text, key in (("tree: /x\n", "tree"), ("patches: [a.patch]\n", "patches"), ("cmdline: quiet\n", "cmdline")):
        spec.write_text(text)
        with pytest.raises(UsageProblem, match=f"key '{key}'"):
            recipe.series_recipe(str(spec), str(tree))


def test_the_not_a_git_tree_message_gives_commands_that_commit_an_ignored_top_level(tmp_path):
    """Issue 44, finding 10: Debian's linux-source tree ignores its own top level in .gitignore;
    the commands the message gives commit it all the same (`git add -A -f`)."""
    import os
    import subprocess

    from perflab.core.errors import PerflabError
    from perflab.execution.vm import recipe

    tree = tmp_path / "linux source"
    tree.mkdir()
    (tree / ".gitignore").write_text(".*\n*\n")
    (tree / "Makefile").write_text("all:\n")
    one = recipe.recipe_of({"tree": str(tree)})
    with pytest.raises(PerflabError) as e:
        recipe.identity(one)
    commands = str(e.value).split("commit an unpacked source first: ", 1)[1].removesuffix(")")
    env = dict(os.environ, GIT_AUTHOR_NAME="A", GIT_AUTHOR_EMAIL="a@example.org", GIT_COMMITTER_NAME="A",
               GIT_COMMITTER_EMAIL="a@example.org")
    subprocess.run(["sh", "-ec", commands], cwd=tmp_path, env=env, check=True, capture_output=True)
    assert "Makefile" in subprocess.run(["git", "-C", str(tree), "ls-files"], capture_output=True, text=True).stdout
    assert recipe.identity(one)[0]          # a commit now
