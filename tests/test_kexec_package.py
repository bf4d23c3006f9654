"""A kernel tree's commits as Debian packages on an SSH machine: `--kernel '../linux-image-*.deb'`
(execution/targets/kexec.py check_built_kernel, take_package, package_of; automate/measurer.py).

The form is checked in one line before anything is built; after each commit's build the pattern
must name one linux-image package the build left, else that commit's build fails naming the
pattern or the file. Packages here are real: Debian's 6.1.0-50 (cached by tools/fetch_kernel.py)
and packages made by dpkg-deb. The box lane installs them (tests/test_kexec_box.py,
test_each_commits_package_is_installed_kexeced_and_purged_on_the_box).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from conftest import assert_one_line_error
from perflab.core.errors import PerflabError
from perflab.core.git import BuildFailed
from perflab.execution.targets import kexec
from test_kexec_refusal import _kernel_tree

pytestmark = pytest.mark.skipif(not Path("/usr/bin/dpkg-deb").exists(), reason="needs dpkg-deb")


def _deb(where: Path, package: str, version: str = "1") -> Path:
    """A real (empty) Debian package of that name, made by dpkg-deb."""
    root = where / f"{package}-root"
    (root / "DEBIAN").mkdir(parents=True)
    (root / "DEBIAN" / "control").write_text(
        f"Package: {package}\nVersion: {version}\nArchitecture: amd64\nMaintainer: t <t@example.org>\n"
        "Description: a test package\n")
    deb = where / f"{package}_{version}_amd64.deb"
    subprocess.run(["dpkg-deb", "--build", "-Zgzip", str(root), str(deb)], check=True, capture_output=True)
    return deb


def test_the_package_says_its_release_and_other_packages_are_refused_naming_them(tmp_path):
    kbuild = kexec.package_of(_deb(tmp_path, "linux-image-6.9.0-rc1+", "6.9.0-rc1+-3"))
    assert (kbuild.name, kbuild.version, kbuild.release) == ("linux-image-6.9.0-rc1+", "6.9.0-rc1+-3", "6.9.0-rc1+")
    debian = kexec.package_of(_deb(tmp_path, "linux-image-6.1.0-50-amd64-unsigned", "6.1.176-1"))
    assert debian.release == "6.1.0-50-amd64"
    for name in ("linux-headers-6.9.0", "linux-libc-dev", "linux-image-6.9.0-dbg", "linux-image-amd64"):
        deb = _deb(tmp_path, name)
        with pytest.raises(PerflabError, match=f"{deb}: package {name} is not a kernel's linux-image package"):
            kexec.package_of(deb)
    junk = tmp_path / "junk.deb"
    junk.write_text("not an archive\n")
    with pytest.raises(PerflabError, match="junk.deb: not a Debian package dpkg-deb can read"):
        kexec.package_of(junk)


def test_run_with_a_package_that_is_not_a_kernels_is_refused_in_one_line(cli, tmp_path):
    config = tmp_path / "perflab.toml"
    config.write_text('[machine.kbox]\nssh = "root@kbox.invalid"\nconnect_timeout = 2\nkexec = true\n')
    headers = _deb(tmp_path, "linux-headers-6.9.0")
    proc = cli("run", "will-it-scale", "--test", "getppid1", "--on", "kbox", "--kernel", headers, check=False,
               env={"PERFLAB_CONFIG": str(config)})
    assert_one_line_error(proc, f"--kernel = '{headers}'", "package linux-headers-6.9.0 is not a kernel's")
    assert not cli.db.exists() or cli.sql("SELECT count(*) FROM run") == [(0,)]


def _tree(tmp_path: Path, build: str) -> tuple[Path, str, Path]:
    """test_kexec_refusal's two-commit "kernel tree" whose build script runs `build`; the tree, its
    last commit and the mark its build leaves (to show nothing was built)."""
    tree, mark = _kernel_tree(tmp_path, build)
    sha = subprocess.run(["git", "-C", str(tree), "rev-parse", "HEAD"], check=True, capture_output=True,
                         text=True).stdout.strip()
    return tree, sha, mark


@pytest.mark.parametrize("kernel, extra, needle", [
    ("../linux-image-*.deb", [], "a kernel package is installed on an SSH machine (--on MACHINE)"),
    ("../../linux-image-*.deb", ["--on", "kbox"], "give the image's path relative to the kernel build's output"),
    ("debian/../linux-image-*.deb", ["--on", "kbox"], "'../linux-image-*.deb'"),
    ("/tmp/linux-image-*.deb", ["--on", "kbox"], "relative to the kernel build's output directory"),
])
def test_a_package_pattern_is_checked_in_one_line_before_anything_is_built(cli, tmp_path, kernel, extra, needle):
    tree, _sha, mark = _tree(tmp_path, "")
    config = tmp_path / "perflab.toml"
    config.write_text('[machine.kbox]\nssh = "root@kbox.invalid"\nconnect_timeout = 2\nkexec = true\n')
    job = tmp_path / "wis.yaml"
    job.write_text("benchmark: will-it-scale\ntest: getppid1\n")
    proc = cli("bisect", "--repo", tree, "--good", "HEAD~1", "--bad", "HEAD", "--build", "sh build.sh",
               "--kernel", kernel, "--job", job, "--metric", "will-it-scale.per_process_ops", *extra,
               check=False, env={"PERFLAB_CONFIG": str(config)})
    assert_one_line_error(proc, f"--kernel {kernel}", needle)
    assert not mark.exists()
    assert not cli.db.exists() or cli.sql("SELECT count(*) FROM run") == [(0,)]


def _builds(tmp_path: Path, build: str, pattern: str = "../linux-image-*.deb"):
    from perflab.automate.measurer import KernelBuilds

    tree, sha, _mark = _tree(tmp_path, build)
    base = tmp_path / "k"
    return KernelBuilds(tree, base / "src", base / "out", base / "images", "sh build.sh", pattern), sha, base


def test_the_commits_package_is_kept_with_it_and_the_builds_other_files_removed(tmp_path):
    """kbuild's bindeb-pkg leaves linux-image, its -dbg symbols, linux-headers, linux-libc-dev and
    the .buildinfo/.changes in the output directory's parent: the linux-image one is kept with the
    commit (as a recipe's package is); the others of that build (its version in their names) go."""
    made = tmp_path / "made"
    made.mkdir()
    debs = [_deb(made, name, "6.9.0-7") for name in ("linux-image-6.9.0", "linux-image-6.9.0-dbg",
                                                     "linux-headers-6.9.0", "linux-libc-dev")]
    build = "".join(f'cp {d} "$KBUILD_OUTPUT/../{d.name}"\n' for d in debs)
    build += 'touch "$KBUILD_OUTPUT/../linux-upstream_6.9.0-7_amd64.changes"\n'
    builds, sha, base = _builds(tmp_path, build)
    # A package left by an earlier build (older than this one) is not this commit's.
    base.mkdir()
    stale = base / "linux-image-6.8.0_6.8.0-1_amd64.deb"
    stale.write_bytes(_deb(made, "linux-image-6.8.0").read_bytes())
    os.utime(stale, (1, 1))
    kept = builds.image_of(sha)
    assert kept == base / "images" / sha / "linux-image.deb"
    assert kexec.package_of(kept).name == "linux-image-6.9.0"
    assert {p.name for p in base.iterdir() if p.is_file()} == {"out.lock", "src.lock", stale.name}
    assert builds.image_of(sha) == kept          # measured again: not built again
    builds.close()


@pytest.mark.parametrize("build, needle", [
    ("", "--build: the build left no package matching --kernel ../linux-image-*.deb (relative to $KBUILD_OUTPUT)"),
    ('cp {headers} "$KBUILD_OUTPUT/../linux-image-x.deb"\n',
     "--kernel ../linux-image-*.deb: {out}/../linux-image-x.deb: package linux-headers-6.9.0 is not a kernel's"),
    ('cp {image} "$KBUILD_OUTPUT/../linux-image-a.deb"\ncp {image} "$KBUILD_OUTPUT/../linux-image-b.deb"\n',
     "--kernel ../linux-image-*.deb matches 2 packages of the build (linux-image-a.deb, linux-image-b.deb)"),
])
def test_a_build_that_leaves_no_kernel_package_fails_that_commits_build_naming_it(tmp_path, build, needle):
    made = tmp_path / "made"
    made.mkdir()
    headers, image = _deb(made, "linux-headers-6.9.0"), _deb(made, "linux-image-6.9.0")
    builds, sha, base = _builds(tmp_path, build.format(headers=headers, image=image))
    with pytest.raises(BuildFailed) as failed:
        builds.image_of(sha)
    said = str(failed.value)
    assert needle.format(out=base / "out") in said and "\n" not in said, said
    assert not (base / "images" / sha).exists()
    builds.close()
