"""The one kernel build path (execution/vm/kbuild.py; issue 45, R5 R7-R10): kill -9, two builds of one
tree at once, a gc in the user's tree, broken cache entries and hostile recipe values, on a small
tree whose Makefile has kbuild's interface (O=, CC=, KCFLAGS=, LOCALVERSION=, bzImage). Each build
of `bzImage` stops at a gate file the test opens, so the order of events is the test's, not the
machine's load's."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import PERFLAB, assert_one_line_error
from services import until

MAKEFILE = """\
O ?= .
GATES := {gates}
olddefconfig tinyconfig defconfig:
\t@mkdir -p $(O) && touch $(O)/.config
bzImage:
\t@v=$$(cat version.txt); echo $$PPID > $(GATES)/make-$$v.pid; touch $(GATES)/started-$$v; \\
\t while [ ! -e $(GATES)/open-$$(cat version.txt) ]; do sleep 0.05; done
\t@mkdir -p $(O)/arch/x86/boot $(O)/include/config
\t@echo "6.1.0$(LOCALVERSION)" > $(O)/include/config/kernel.release
\t@printf 'image %s kcflags=%s\\n' "$$(cat version.txt)" "$(KCFLAGS)" > $(O)/arch/x86/boot/bzImage
\t@echo built >> $(O)/builds.txt
\t@printf 'ffffffff81000000 T _stext\\n' > $(O)/System.map
"""
WAIT = 120.0      # seconds a step of a test may take at most (a hang fails, later; no verdict depends on it)


@pytest.fixture
def cli(cli, tmp_path):
    """The CLI with a kernel-build cache of the test's own (the compiler cache stays the session's)."""
    cli.env["XDG_CACHE_HOME"] = str(tmp_path / "cache")
    return cli


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.org", *args],
                          check=True, capture_output=True, text=True).stdout.strip()


def _tree(tmp_path: Path, versions=("a", "b")) -> tuple[Path, Path]:
    """A tree with a branch per version (main is the first); and its gates' directory."""
    tree, gates = tmp_path / "linux", tmp_path / "gates"
    tree.mkdir()
    gates.mkdir()
    (tree / "Makefile").write_text(MAKEFILE.format(gates=gates))
    _git(tree, "init", "-q", "-b", "main")
    for i, v in enumerate(versions):
        if i:
            _git(tree, "checkout", "-q", "-b", v, "main")
        (tree / "version.txt").write_text(v + "\n")
        _git(tree, "add", "-A")
        _git(tree, "commit", "-qm", v)
    _git(tree, "checkout", "-q", "main")
    return tree, gates


def _recipe(tmp_path: Path, tree: Path, ref: str, extra: str = "") -> Path:
    path = tmp_path / f"recipe-{ref}.yaml"
    path.write_text(f"tree: {tree}\nref: {ref}\nconfig: defconfig\n{extra}")
    return path


def _alive(pid: int) -> bool:
    """The process exists and is not a zombie (one already ended, waiting to be reaped)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _image(out: str) -> str:
    return Path(out.split()[-1]).read_text()


def test_kill_9_of_a_kernel_build_kills_make_and_the_next_ref_builds_its_own(cli, tmp_path):
    """R7: kill -9 of `perflab kernel build` mid-make leaves no make running (the launcher's
    parent-death signal kills its process group); a later build of another ref publishes that ref."""
    tree, gates = _tree(tmp_path)
    first = cli.popen("kernel", "build", _recipe(tmp_path, tree, "main"))
    try:
        until("started", lambda: (gates / "started-a").exists() or first.poll() is not None, WAIT)
        assert first.poll() is None, first.communicate()
        make = int((gates / "make-a.pid").read_text())
        first.send_signal(signal.SIGKILL)
        first.communicate()
        deadline = time.monotonic() + WAIT
        while _alive(make) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(make), "make outlived perflab's kill -9"
    finally:
        (gates / "open-a").touch()           # whatever is left ends now
        if first.poll() is None:
            first.kill()
            first.communicate()
    (gates / "open-b").touch()
    done = cli("kernel", "build", _recipe(tmp_path, tree, "b"), timeout=WAIT)
    assert _image(done.stdout).startswith("image b"), done
    assert "did not end" in done.stderr        # the killed build's output directory was emptied first
    assert "main" not in cli("kernel", "list").stdout


def test_two_builds_of_one_tree_at_once_each_publish_their_own_source(cli, tmp_path):
    """R8: refs A and B of one tree built at once: the second waits for the first (the lock on the
    checkout), so A's image holds A's source and B's B's."""
    tree, gates = _tree(tmp_path)
    (gates / "open-b").touch()
    first = cli.popen("kernel", "build", _recipe(tmp_path, tree, "main"))
    second = None
    try:
        until("started", lambda: (gates / "started-a").exists() or first.poll() is not None, WAIT)
        assert first.poll() is None, first.communicate()
        err = open(tmp_path / "second.err", "w+")
        second = subprocess.Popen([PERFLAB, "kernel", "build", str(_recipe(tmp_path, tree, "b"))], env=cli.env,
                                  cwd=tmp_path, stdout=subprocess.PIPE, stderr=err, text=True)
        # B either waits for A (the fix) or has moved the shared checkout to B under A's make (the defect).
        until("waiting or started", lambda: "waiting for the build" in (tmp_path / "second.err").read_text()
              or (gates / "started-b").exists() or second.poll() is not None, WAIT)
        (gates / "open-a").touch()
        a_out, a_err = first.communicate(timeout=WAIT)
        b_out, _ = second.communicate(timeout=WAIT)
    finally:
        (gates / "open-a").touch()
        for p in (first, second):
            if p is not None and p.poll() is None:
                p.kill()
                p.communicate()
    assert first.returncode == 0 and second.returncode == 0, (a_err, (tmp_path / "second.err").read_text())
    assert _image(a_out).startswith("image a"), _image(a_out)
    assert _image(b_out).startswith("image b"), _image(b_out)


def test_a_gc_in_the_users_tree_does_not_break_the_cache_clone(cli, tmp_path):
    """R9: the cache's clone owns its objects: after the commit it was checked out at is rewritten and
    pruned in the user's tree (`git gc --prune=now`), the next build works. A `--shared` clone left by
    an older perflab (an alternates file) is cloned again."""
    from perflab.execution.vm import recipe

    tree, gates = _tree(tmp_path, versions=("a",))
    for v in ("a", "a2"):
        (gates / f"open-{v}").touch()
    cache = tmp_path / "cache" / "perflab" / "kernel-builds"
    cache.mkdir(parents=True)
    legacy = cache / f"src-{recipe._digest(str(tree))}"
    subprocess.run(["git", "clone", "-q", "--shared", "--no-checkout", str(tree), str(legacy)], check=True)
    first = cli("kernel", "build", _recipe(tmp_path, tree, "main"))
    assert _image(first.stdout).startswith("image a") and "cloned again" in first.stderr
    assert not (legacy / ".git/objects/info/alternates").exists()
    (tree / "version.txt").write_text("a2\n")
    _git(tree, "commit", "-q", "--amend", "-am", "a2")
    _git(tree, "reflog", "expire", "--expire=now", "--all")
    _git(tree, "gc", "-q", "--prune=now")
    again = cli("kernel", "build", _recipe(tmp_path, tree, "main"), check=False)
    assert again.returncode == 0, again.stderr
    assert _image(again.stdout).startswith("image a2")


def test_a_broken_cache_entry_is_rebuilt_never_an_internal_error_or_a_hang(cli, tmp_path):
    """R10: facts.json corrupt, missing or a FIFO, the image truncated: the recipe is built again."""
    tree, gates = _tree(tmp_path, versions=("a",))
    (gates / "open-a").touch()
    spec = _recipe(tmp_path, tree, "main")
    image = Path(cli("kernel", "build", spec).stdout.split()[-1])
    entry = image.parent
    builds = next(entry.parent.glob("out-*/builds.txt"))

    def corrupt():
        (entry / "facts.json").write_text('{"kernel_recipe_key": ')

    def missing():
        (entry / "facts.json").unlink()

    def fifo():
        (entry / "facts.json").unlink()
        os.mkfifo(entry / "facts.json")
        assert "6.1.0" not in cli("kernel", "list", timeout=WAIT).stdout      # listed without its facts; no hang

    def truncated():
        image.write_text("image")

    for n, breaking in enumerate((corrupt, missing, fifo, truncated), start=2):
        breaking()
        done = cli("kernel", "build", spec, check=False, timeout=WAIT)
        assert done.returncode == 0 and "internal error" not in done.stderr, (breaking.__name__, done.stderr)
        assert image.read_text().startswith("image a") and builds.read_text().count("built") == n, breaking.__name__
    again = cli("kernel", "build", spec)          # a sound entry is taken as it is
    assert builds.read_text().count("built") == 5 and Path(again.stdout.split()[-1]) == image


@pytest.mark.parametrize("key, value, needle", [
    ("cc", 'sh -c "touch {x}"', "key 'kernel.cc'"),
    ("cc", "-fplugin=x", "key 'kernel.cc'"),
    ("kcflags", "-O2 $(shell touch {x})", "key 'kernel.kcflags'"),
    ("kcflags", "-O2 `touch {x}`", "key 'kernel.kcflags'"),
    ("kcflags", "-O2;touch {x}", "key 'kernel.kcflags'"),
    ("config", "--eval=$(shell touch X)config", "key 'kernel.config'"),     # X in make's directory
    ("config", "-fconfig", "key 'kernel.config'"),
])
def test_recipe_values_are_values_never_options_or_shell(cli, tmp_path, key, value, needle):
    """R5: cc a compiler's name or path, kcflags plain flags, config no option: refused in one line
    naming the key, before anything runs (the file the value would make is not made)."""
    from perflab.core.errors import UsageProblem
    from perflab.execution.vm import recipe

    tree, gates = _tree(tmp_path, versions=("a",))
    (gates / "open-a").touch()
    x = tmp_path / "X"
    value = value.format(x=x)
    spec = _recipe(tmp_path, tree, "main").read_text().replace("config: defconfig\n", "")
    (tmp_path / "hostile.yaml").write_text(spec + f"{key}: '{value}'\n")
    assert_one_line_error(cli("kernel", "build", tmp_path / "hostile.yaml", check=False), needle)
    assert not list(tmp_path.rglob("X"))
    with pytest.raises(UsageProblem, match=needle):
        recipe.recipe_of({"tree": str(tree), key: value})


def test_plain_flags_reach_make_as_they_are(cli, tmp_path):
    """The values that pass are given to make unexpanded and unsplit: the image says what it was built with."""
    tree, gates = _tree(tmp_path, versions=("a",))
    (gates / "open-a").touch()
    done = cli("kernel", "build", _recipe(tmp_path, tree, "main", "kcflags: -Os -falign-functions=2 -DX=1,2\n"
                                                              "cc: /usr/bin/gcc\nname: -t\n"))
    assert _image(done.stdout) == "image a kcflags=-Os -falign-functions=2 -DX=1,2\n"
    assert done.stdout.startswith("6.1.0-t ")


def test_a_bisection_s_kernel_builds_take_the_same_path(tmp_path):
    """KernelBuilds (bisect, series, the robot, a lab box): each commit built from a clean checkout
    (a file left in the worktree is gone), published per commit and checked before it is used again
    (a corrupt facts.json: rebuilt); a failing build is BuildFailed with the log's tail, nothing kept."""
    from perflab.automate.measurer import KernelBuilds
    from perflab.core.git import BuildFailed

    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    shas = []
    for v in ("v0", "v1", "fail"):
        (repo / "v.txt").write_text(v + "\n")
        _git(repo, "add", "-A")
        _git(repo, "commit", "-qm", v)
        shas.append(_git(repo, "rev-parse", "HEAD"))
    command = ('set -e; test ! -e stray; ! grep -q fail v.txt || { echo "v.txt: error: cannot build" >&2; exit 1; }; '
               'mkdir -p "$KBUILD_OUTPUT/arch/x86/boot"; cat v.txt > "$KBUILD_OUTPUT/arch/x86/boot/bzImage"; '
               'echo built >> "$KBUILD_OUTPUT/count"')
    builds = KernelBuilds(repo, tmp_path / "src", tmp_path / "out", tmp_path / "images", command,
                          "arch/x86/boot/bzImage")
    try:
        assert builds.image_of(shas[0]).read_text() == "v0\n"
        (tmp_path / "src" / "stray").write_text("left by someone\n")
        assert builds.image_of(shas[1]).read_text() == "v1\n"
        assert builds.image_of(shas[0]).read_text() == "v0\n"
        assert (tmp_path / "out" / "count").read_text().count("built") == 2       # kept, not rebuilt
        (tmp_path / "images" / shas[0] / "facts.json").write_text("not json")
        assert builds.image_of(shas[0]).read_text() == "v0\n"
        assert (tmp_path / "out" / "count").read_text().count("built") == 3
        with pytest.raises(BuildFailed, match=r"--build failed: exited with status 1: .*cannot build") as e:
            builds.image_of(shas[2])
        assert "\n" not in str(e.value) and not (tmp_path / "images" / shas[2]).exists()
    finally:
        builds.close()
    assert _git(repo, "worktree", "list").count("\n") == 0


def test_a_series_clone_stays_whole_after_a_gc_in_the_users_repository(tmp_path, monkeypatch):
    """R9 for `perflab series`: its clone (the same kbuild.Clone) owns its objects; the `--shared` one
    of before kept refs to commits a rewrite and `git gc --prune=now` in the repository took (git fsck
    failed in it)."""
    from test_patch_series import _git as dev_git, _series

    from perflab.automate import series

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    repo, mbox, _base = _series(tmp_path)
    series.apply(str(repo), series.read_series(str(mbox)))
    (repo / "extra.txt").write_text("x\n")
    dev_git(repo, "add", "extra.txt")
    dev_git(repo, "commit", "-q", "--amend", "-m", "base, amended")
    dev_git(repo, "branch", "-D", "topic")
    dev_git(repo, "reflog", "expire", "--expire=now", "--all")
    dev_git(repo, "gc", "-q", "--prune=now")
    clone, base = series.apply(str(repo), series.read_series(str(mbox)), base="main")
    assert base == dev_git(repo, "rev-parse", "main")
    fsck = subprocess.run(["git", "-C", str(clone), "fsck", "--connectivity-only"], capture_output=True, text=True)
    assert fsck.returncode == 0, fsck.stderr


def test_two_measurers_on_one_build_directory_take_turns(tmp_path):
    """R8 for KernelBuilds (a lab box's kernel builds are kept per repository and shared by its
    workers): two builds of different commits in the same worktree and output directory at once;
    the second waits for the first, and each image holds its own commit."""
    import threading

    from perflab.automate.measurer import KernelBuilds

    repo, gates = tmp_path / "repo", tmp_path / "gates"
    repo.mkdir()
    gates.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    shas = []
    for v in ("v0", "v1"):
        (repo / "v.txt").write_text(v + "\n")
        _git(repo, "add", "-A")
        _git(repo, "commit", "-qm", v)
        shas.append(_git(repo, "rev-parse", "HEAD"))
    command = (f'touch {gates}/started-$(cat v.txt); while [ ! -e {gates}/open-$(cat v.txt) ]; do sleep 0.05; done; '
               'mkdir -p "$KBUILD_OUTPUT/arch/x86/boot"; cat v.txt > "$KBUILD_OUTPUT/arch/x86/boot/bzImage"')
    said: list[str] = []
    images: dict[int, str] = {}

    def measurer(i: int) -> None:
        builds = KernelBuilds(repo, tmp_path / "src", tmp_path / "out", tmp_path / "images", command,
                              "arch/x86/boot/bzImage", owned=False, say=said.append)
        images[i] = builds.image_of(shas[i]).read_text()

    (gates / "open-v1").touch()
    first = threading.Thread(target=measurer, args=(0,))
    first.start()
    until("started", lambda: (gates / "started-v0").exists(), WAIT)
    second = threading.Thread(target=measurer, args=(1,))
    second.start()
    until("waiting or started", lambda: any("waiting for the build" in line for line in said)
          or (gates / "started-v1").exists() or not second.is_alive(), WAIT)
    (gates / "open-v0").touch()
    first.join(WAIT)
    second.join(WAIT)
    assert images == {0: "v0\n", 1: "v1\n"}


PACKAGING = """\
bindeb-pkg:
\t@r=$$(cat $(O)/include/config/kernel.release); mkdir -p $(O)/pkg/DEBIAN; \\
\t printf 'Package: linux-image-%s\\nVersion: %s\\nArchitecture: amd64\\nMaintainer: t <t@example.org>\\nDescription: t\\n' \\
\t   "$$r" "$(KDEB_PKGVERSION)" > $(O)/pkg/DEBIAN/control; \\
\t dpkg-deb -b $(O)/pkg $(O)/../linux-image-$${r}_$(KDEB_PKGVERSION)_amd64.deb >/dev/null; \\
\t touch $(O)/../linux-libc-dev_$(KDEB_PKGVERSION)_amd64.deb $(O)/../linux-upstream_$(KDEB_PKGVERSION)_amd64.changes
"""


def test_a_recipe_built_as_a_package_is_an_entry_of_its_own_and_leaves_nothing_beside_it(tmp_path, monkeypatch):
    """The package form (make bindeb-pkg, as a recipe goes on an SSH machine): its .deb published
    whole as deb-KEY (KEY: the image's key and the form), named in its facts, with a version that
    holds the key; the other files bindeb-pkg leaves beside the build directory removed; asked
    again, taken from the cache. The image of the same recipe is another entry."""
    import shutil

    from perflab.execution.vm import recipe

    if shutil.which("dpkg-deb") is None or recipe.missing_package_tools():
        pytest.skip("dpkg-dev and fakeroot are needed for a package build")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    tree, gates = _tree(tmp_path, versions=("a",))
    (gates / "open-a").touch()
    with open(tree / "Makefile", "a") as f:
        f.write(PACKAGING)
    _git(tree, "commit", "-qam", "packaging")
    r = recipe.recipe_of({"tree": str(tree), "config": "defconfig", "name": "-box"})
    image_key = recipe.identity(r)[2]
    done = recipe.build(r, jobs=1, package=True)
    version = recipe.package_version("6.1.0-box", image_key)
    assert done.image == recipe.cache_dir() / f"deb-{recipe.package_key(image_key)}" / recipe.DEB
    said = subprocess.run(["dpkg-deb", "-f", str(done.image), "Package", "Version"], capture_output=True, text=True,
                          check=True).stdout.split()
    assert said == ["Package:", "linux-image-6.1.0-box", "Version:", version]
    assert (done.facts["kernel_package"], done.facts["kernel_package_version"]) == ("linux-image-6.1.0-box", version)
    assert f"KDEB_PKGVERSION={version} DPKG_FLAGS=-d bindeb-pkg" in done.facts["kernel_build_commands"]
    assert sorted(p.name for p in recipe.cache_dir().iterdir() if p.suffix in (".deb", ".changes")) == []
    out = next(p for p in recipe.cache_dir().glob("out-*") if p.is_dir())
    builds = (out / "builds.txt").read_text()
    again = recipe.build(r, jobs=1, package=True)
    assert again.image == done.image and (out / "builds.txt").read_text() == builds
    image = recipe.build(r, jobs=1)
    assert image.image == recipe.cache_dir() / f"image-{image_key}" / "bzImage" and image.key != again.key
