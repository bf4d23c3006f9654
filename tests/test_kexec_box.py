"""The kernel under test on an SSH machine (execution/targets/kexec.py), on a simulated test box.

The box (tests/testbox.py) is a QEMU guest (TCG) of a Debian 12 root file system made by
mmdebstrap, with openssh-server and kexec-tools, booted on Debian's 6.1.0-47 kernel, reached over
SSH on 127.0.0.1 (user-mode networking). It is booted once for this module; its power-cycle
command is QEMU's monitor `system_reset`, its console the serial output file.

Timing here (2 cores shared by seven, load 1-5): the box's image is built once (about 4 minutes,
cached under ~/.cache/perflab/box/); the module's one boot 21 s; the running-kernel job 5 s;
6.1.0-50 installed (dpkg -i, its initramfs), kexec'ed, the job, the reboot back and the purge
271 s; the panicking kernel (it waits out its machine's 180 s boot_timeout, then the power
cycle and the boot back) 213 s: 8.5 minutes in all. A kernel recipe (linux-source-6.1, perflab's
minimal config and what the box's systemd needs: testbox.BOX_FRAGMENT) built as a Debian package
(make bindeb-pkg; the first time minutes, then cached in ~/.cache/perflab/kernel-builds, as the
box's image is), installed, kexec'ed and back by kexec. A second measure (load average 10-14
falling to 2, with six other engineers' tests): the module 1,386 s; the boot 81 s; 6.1.0-50
974 s (its dpkg -i and initramfs under TCG at that load); the recipe's package (built before,
2,398 s at load 11-14) 103 s; the panic 208 s. The lab's way to the same kexec (submit to
`perflab worker --machine testbox`, a real redis-server) ran 918 s alone, with the box's image
and boot, at load 10-15. Each commit's package of a kernel tree (6.1.0-50, then the recipe's),
installed, kexec'ed and purged in turn: 1,140 s alone with the boot at load 11-13; perf asked
for on the kernel under test (6.1.0-50 installed, kexec'ed, refused, back): 741 s alone with
the boot at load 12-13. Through the worker, the panicking kernel then a plain job: 229 s after
the boot at load 1.5-2.9; a two-patch series of the release tree (`series --kernel --on`): 751 s
alone with the boot at load 3.7-4.7. Marked slow and vm (tests/conftest.py).
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pytest

import testbox

pytestmark = pytest.mark.vm

DEFAULT = "6.1.0-47-amd64"
OTHER = "6.1.0-50-amd64"
PACKAGE = f"linux-image-{OTHER}-unsigned"


@pytest.fixture(scope="module")
def box(tmp_path_factory):
    why = testbox.missing()
    if why:
        pytest.skip(f"the simulated test box cannot run here: {why}")
    running = testbox.boot(tmp_path_factory.mktemp("box"))
    yield running
    running.stop()


@pytest.fixture
def on_box(cli, box, tmp_path):
    """`cli` with perflab's configuration naming the box twice: `testbox`, and `quickbox` whose
    boot_timeout (a kernel that never answers waits it out) is shorter; its power-cycle command
    leaves a line in tmp_path/cycled before it resets the box."""
    config = tmp_path / "perflab.toml"
    cycled = tmp_path / "cycled"
    quick = box.machine_config("quickbox", boot_timeout=180).replace(
        f'power_cycle = "{box.power_cycle_command}"', f'power_cycle = "echo cycled >> {cycled}; {box.power_cycle_command}"')
    config.write_text(box.machine_config("testbox", boot_timeout=600) + "\n" + quick)
    cli.env.update(PERFLAB_CONFIG=str(config))
    cli.cycled = cycled
    return cli


def _run(cli) -> tuple[int, str, dict, dict, str | None]:
    (run_id, status, params, error), = cli.sql("SELECT id, status, params, error FROM run")
    (facts,), = cli.sql("SELECT e.facts FROM run r JOIN environment e ON e.id = r.environment_id WHERE r.id = ?",
                        (run_id,))
    return run_id, status, json.loads(params), json.loads(facts), error


def _wis(cli, *more: str, check: bool = True, env: dict | None = None):
    return cli("run", "will-it-scale", "--test", "getppid1", "--duration", "1", "--warmup-time", "0", "--runs", "2",
               *more, timeout=3600, check=check, env=env)


def test_a_job_on_the_boxs_running_kernel(on_box, box):
    _wis(on_box, "--on", "testbox")
    _, status, params, facts, _ = _run(on_box)
    assert status == "finished" and params["on"] == "testbox" and "kernel" not in params
    assert facts["kernel_release"] == DEFAULT and facts["hostname"] == "testbox"
    ops = on_box.sql("SELECT value FROM sample WHERE metric = 'will-it-scale.per_process_ops'")
    assert len(ops) == 2 and all(v > 0 for (v,) in ops)


def test_a_debian_kernel_installed_kexeced_then_the_box_back_and_the_package_gone(on_box, box):
    before = box.ssh("cat /proc/sys/kernel/random/boot_id").stdout.strip()
    proc = _wis(on_box, "--on", "testbox", "--kernel", f"debian:{OTHER}")
    _, status, params, facts, _ = _run(on_box)
    assert status == "finished", facts
    assert params["kernel"] == f"debian:{OTHER}"
    # The job ran on the kernel under test, started by kexec with the box's command line.
    assert facts["kernel_release"] == OTHER and facts["kexec_release"] == OTHER
    assert facts["kexec_default_kernel"] == DEFAULT and facts["kexec_initrd"] == f"/boot/initrd.img-{OTHER}"
    assert "root=/dev/vda" in facts["kexec_cmdline"]
    # Back on its default kernel (a boot after the one that ran the job) by kexec, the package purged.
    assert f"testbox: back on its default kernel {DEFAULT} by kexec" in proc.stderr
    assert box.ssh("uname -r").stdout.strip() == DEFAULT
    assert box.ssh("cat /proc/sys/kernel/random/boot_id").stdout.strip() != before
    assert box.ssh(f"dpkg-query -W -f='${{Status}}' {PACKAGE}").stdout.strip() in ("", "unknown ok not-installed")
    assert box.ssh(f"ls /boot/vmlinuz-{OTHER} /var/tmp/perflab-kernel").returncode != 0


def test_a_recipe_built_as_a_package_kexeced_then_back_by_kexec_and_the_package_gone(on_box, box, tmp_path):
    """A kernel recipe (linux-source-6.1, perflab's minimal config and what the box's systemd needs)
    built here as a Debian package (make bindeb-pkg, the one kernel build path), dpkg -i'd on the
    box, kexec'ed, `uname -r` the recipe's release; back on the default kernel by kexec (its
    /boot/vmlinuz, initrd and recorded command line), the package purged."""
    spec = testbox.box_recipe(tmp_path / "box.yaml")
    if spec is None:
        pytest.skip("no linux-source-6.1 (apt-get install linux-source-6.1 flex bison)")
    before = box.ssh("cat /proc/sys/kernel/random/boot_id").stdout.strip()
    # The build (minutes) is kept in the user's cache, as the box's image is.
    proc = _wis(on_box, "--on", "testbox", "--kernel", spec, env={"XDG_CACHE_HOME": str(testbox.cache_home().parent)})
    _, status, params, facts, error = _run(on_box)
    assert status == "finished", (error, proc.stderr[-2000:])
    assert params["kernel_build"] == "-box" and "kernel" not in params
    release = facts["kexec_release"]
    assert release.startswith("6.1.192-box") and facts["kernel_release"] == release
    assert facts["kexec_package"] == f"linux-image-{release}"
    assert facts["kexec_package_version"].startswith(f"{release}-perflab.")
    assert facts["kexec_default_kernel"] == DEFAULT and "root=/dev/vda" in facts["kexec_default_cmdline"]
    # The way back: kexec into the default kernel, said on stderr.
    assert f"testbox: back on its default kernel {DEFAULT} by kexec" in proc.stderr
    assert box.ssh("uname -r").stdout.strip() == DEFAULT
    assert box.ssh("cat /proc/sys/kernel/random/boot_id").stdout.strip() != before
    assert box.ssh(f"dpkg-query -W -f='${{Status}}' linux-image-{release}").stdout.strip() in (
        "", "unknown ok not-installed")
    assert box.ssh(f"ls /boot/vmlinuz-{release} /lib/modules/{release} /var/tmp/perflab-kernel").returncode != 0


def _panicking_image() -> Path:
    """Debian's 6.1.0-50 image without an initramfs (the box has none of that release): its virtio
    disk driver is a module, so it panics, unable to mount the root file system, and never answers."""
    image = testbox.kernel_dir(PACKAGE) / "boot" / f"vmlinuz-{OTHER}"
    if not image.is_file():
        pytest.skip(f"no cached {image} (tools/fetch_kernel.py --both)")
    return image


def test_a_kernel_that_panics_at_boot_power_cycles_the_box_and_fails_the_run(on_box, box, tmp_path):
    image = _panicking_image()
    proc = _wis(on_box, "--on", "quickbox", "--kernel", str(image), check=False)
    assert proc.returncode != 0
    _, status, params, facts, error = _run(on_box)
    assert status == "failed" and params["kernel"] == str(image)
    assert error.startswith("kernel did not boot on quickbox"), error
    assert "VFS: Unable to mount root" in error or "Kernel panic" in error, error
    assert on_box.cycled.read_text().splitlines() == ["cycled"]
    # The box is back on its default kernel, with nothing of ours left.
    assert box.ssh("uname -r").stdout.strip() == DEFAULT
    assert box.ssh("ls /var/tmp/perflab-kernel").returncode != 0
    assert on_box.sql("SELECT count(*) FROM sample") == [(0,)]


@contextlib.contextmanager
def _machine_lab(on_box, redis_server, tmp_path: Path, machine: str):
    """A lab (a real redis-server) whose worker drives the box as `machine` (`perflab worker
    --machine`), and a will-it-scale job file to submit to it: (lab, job file)."""
    import test_lab_ssh
    from test_lab import Lab

    lab = Lab(tmp_path, redis_server.url, str(tmp_path / "shared.db"))
    lab.env.update(PERFLAB_CONFIG=on_box.env["PERFLAB_CONFIG"], PERFLAB_MACHINE_LOCKS=str(tmp_path / "locks"))
    try:
        test_lab_ssh._start_machine_worker(lab, machine)
        job = tmp_path / "wis.yaml"
        job.write_text("benchmark: will-it-scale\ntest: getppid1\nduration: 1\nwarmup_time: 0\nruns: 2\n")
        yield lab, job
    finally:
        lab.stop()


def test_a_lab_worker_of_the_box_boots_a_submitted_debian_kernel_there(on_box, box, redis_server, tmp_path):
    """0-day's way: `perflab submit JOB --box testbox --kernel debian:R` to the worker that drives the
    box (`perflab worker --machine testbox`): the kernel installed and kexec'ed there, the job run on
    it, the box back on its default kernel and the package gone (the same path as `run --on --kernel`)."""
    import test_lab_ssh

    with _machine_lab(on_box, redis_server, tmp_path, "testbox") as (lab, job):
        sid = lab.perflab("submit", job, "--box", "testbox", "--kernel", f"debian:{OTHER}").stdout.strip()
        lab.wait_until("the job's end", lambda: test_lab_ssh._ended(lab, sid, 1), timeout=3600, step=1)
        lab.wait_until("the run uploaded", lambda: test_lab_ssh._runs(lab)[1], timeout=120)
        _store, (run,) = test_lab_ssh._runs(lab)
    facts = test_lab_ssh._facts(run)
    assert run.status == "finished" and run.box == "testbox", (run.error, lab.logs())
    assert run.params["on"] == "testbox" and run.params["kernel"] == f"debian:{OTHER}"
    assert facts["kernel_release"] == OTHER and facts["kexec_default_kernel"] == DEFAULT
    assert box.ssh("uname -r").stdout.strip() == DEFAULT
    assert box.ssh(f"dpkg-query -W -f='${{Status}}' {PACKAGE}").stdout.strip() in ("", "unknown ok not-installed")


def test_a_lab_worker_of_the_box_power_cycles_a_panicking_kernel_and_goes_on_serving(on_box, box, redis_server,
                                                                                      tmp_path):
    """`perflab submit JOB --box quickbox --kernel IMAGE` of the panicking kernel above to the worker
    that drives the box (`perflab worker --machine quickbox`): the box comes back by its power-cycle
    command, the submission is counted failed and its run stored failed, "kernel did not boot" with
    the console's text; the worker goes on serving: the next submission runs on the default kernel."""
    import test_lab_ssh
    from perflab.automate.lab import app

    image = _panicking_image()
    with _machine_lab(on_box, redis_server, tmp_path, "quickbox") as (lab, job):
        panics = lab.perflab("submit", job, "--box", "quickbox", "--kernel", image).stdout.strip()
        lab.wait_until("the panic's end", lambda: test_lab_ssh._ended(lab, panics, 1), timeout=3600, step=1)
        assert lab.progress(panics).get("failed:quickbox") == "1", (lab.progress(panics), lab.logs())
        # What a waiting submitter reads of the task: failed, the reason.
        (task,) = lab.redis.smembers(app.done_key(panics))
        told = json.loads(lab.redis.get(app.result_key(task)))
        assert told["status"] == "failed" and told["error"].startswith("kernel did not boot on quickbox"), told
        good = lab.submit(job, "quickbox")
        lab.wait_until("the next job's end", lambda: test_lab_ssh._ended(lab, good, 1), timeout=3600, step=1)
        assert lab.progress(good).get("done:quickbox") == "1", (lab.progress(good), lab.logs())
        lab.wait_until("both runs uploaded", lambda: len(test_lab_ssh._runs(lab)[1]) == 2, timeout=120)
        store, runs = test_lab_ssh._runs(lab)
        state = lab.worker_state("quickbox")
    (failed,) = [r for r in runs if r.job["lab"]["submission"] == panics]
    (served,) = [r for r in runs if r.job["lab"]["submission"] == good]
    assert failed.status == "failed" and failed.params["kernel"] == str(image), (failed.error, lab.logs())
    assert failed.error.startswith("kernel did not boot on quickbox"), failed.error
    assert "VFS: Unable to mount root" in failed.error or "Kernel panic" in failed.error, failed.error
    assert not store.samples([failed.id])
    assert on_box.cycled.read_text().splitlines() == ["cycled"]
    # The worker served on: the next job on the box's default kernel, nothing of the panic left there.
    assert served.status == "finished" and "kernel" not in served.params, (served.error, lab.logs())
    assert test_lab_ssh._facts(served)["kernel_release"] == DEFAULT
    assert state.get("state") == "idle", state
    assert box.ssh("uname -r").stdout.strip() == DEFAULT
    assert box.ssh("ls /var/tmp/perflab-kernel").returncode != 0


# A kernel tree whose build "makes" one of two real Debian kernels, as kernel.txt of the commit says
# (tests/test_kernel_bisect.py's way): c0 6.1.0-47 (the box's default release: kexec'ed all the same,
# told from the default kernel by `uname -v`), c1 6.1.0-50 (the culprit), c2 6.1.0-50.
BOX_BUILD = """set -e
mkdir -p "$KBUILD_OUTPUT/arch/x86/boot"
cp "$(cat kernel.txt)" "$KBUILD_OUTPUT/arch/x86/boot/bzImage"
"""
# The planted difference: the release the job reads on the box, an exact metric (47 or 50).
RELEASE_JOB = """benchmark: cmd
command: uname -r
metrics:
  - {name: kernel.abi, pattern: '^6\\.1\\.0-(\\d+)-amd64', direction: 1}
"""


def kernel_tree(repo: Path, images: list[Path], build: str = BOX_BUILD) -> list[str]:
    """A kernel tree at `repo` whose commit i builds images[i] (`build`: BOX_BUILD, or DEB_BUILD for
    a package); its commits."""
    import subprocess

    repo.mkdir()
    git = lambda *a: subprocess.run(["git", "-C", str(repo), *a], check=True, capture_output=True,  # noqa: E731
                                    text=True).stdout.strip()
    git("init", "-q")
    (repo / "build.sh").write_text(build)
    shas = []
    for i, image in enumerate(images):
        (repo / "kernel.txt").write_text(f"{image}\n")
        (repo / "n.txt").write_text(f"{i}\n")
        git("add", "-A")
        git("-c", "user.name=t", "-c", "user.email=t@example.org", "commit", "-qm", f"c{i}")
        shas.append(git("rev-parse", "HEAD"))
    return shas


@contextlib.contextmanager
def other_release_installed(box):
    """An image of 6.1.0-50 boots on the box with that release's modules and initramfs, as a box
    kept for a kernel tree has them: its package installed while inside, purged after."""
    import subprocess

    from perflab.execution.targets import kexec

    deb = kexec.debian_deb(f"debian:{OTHER}")
    with open(deb, "rb") as f:
        done = subprocess.run(["ssh", "-F", str(box.ssh_config), "testbox",
                               "cat > /var/tmp/k.deb && DEBIAN_FRONTEND=noninteractive dpkg -i /var/tmp/k.deb "
                               ">/dev/null && rm /var/tmp/k.deb"], stdin=f, capture_output=True, text=True,
                              timeout=3600)
    assert done.returncode == 0, done.stderr
    try:
        yield
    finally:
        box.ssh(f"DEBIAN_FRONTEND=noninteractive dpkg --purge {PACKAGE} >/dev/null; rm -rf /lib/modules/{OTHER}",
                timeout=1800)


@contextlib.contextmanager
def release_bisection(box, tmp_path: Path):
    """The kernel tree (c0 6.1.0-47, c1 and c2 6.1.0-50) and its job and box configuration, with
    6.1.0-50 installed on the box while inside: (repo, commits, job file, configuration file)."""
    k47, k50 = _debian_images()
    with other_release_installed(box):
        repo = tmp_path / "linux"
        shas = kernel_tree(repo, [k47, k50, k50])
        job = tmp_path / "release.yaml"
        job.write_text(RELEASE_JOB)
        # A kexec's page copy under TCG took 10 minutes at load 13 here (2 boxes, 2 cores): the box's
        # boot_timeout is longer for these tests of 14 kexecs, which are not tests of that bound.
        config = tmp_path / "slow-box.toml"
        config.write_text(box.machine_config("testbox", boot_timeout=2400))
        yield repo, shas, job, config


def _debian_images() -> tuple[Path, Path]:
    from perflab.execution.vm import kernel as kernels

    k47, k50 = kernels.cached(kernels.DEFAULT_PACKAGE), kernels.cached(kernels.OTHER_PACKAGE)
    if not k47 or not k50:
        pytest.skip("needs both Debian kernels: python tools/fetch_kernel.py --both")
    return k47, k50


def _assert_kexec_runs(runs, shas: list[str]) -> None:
    """Every run of a kernel bisection (or the robot) on the box: on its commit's kernel, kexec'ed there."""
    for commit, status, params, facts in runs:
        params, facts = (json.loads(x) if isinstance(x, str) else x for x in (params, facts))
        want = DEFAULT if commit == shas[0] else OTHER
        assert status == "finished" and params["on"] == "testbox", (status, facts)
        # One parameter for every commit's kernel: their runs compare.
        assert params["kernel"] == "arch/x86/boot/bzImage"
        assert facts["kernel_release"] == want and facts["kexec_release"] == want
        assert facts["kexec_default_kernel"] == DEFAULT and facts["kexec_initrd"] == f"/boot/initrd.img-{want}"


def test_a_kernel_bisection_kexecs_each_commits_kernel_on_the_box(on_box, box, tmp_path):
    """`perflab bisect --kernel IMAGE --on testbox`: each commit's image built here (the one kernel
    build path), copied to the box, kexec'ed, `uname -r` and `uname -v` checked, the job run there,
    the box back on its default kernel by kexec and the image removed, step after step. The metric
    is the release the job reads there (exact): the verdict does not depend on load."""
    import subprocess

    with release_bisection(box, tmp_path) as (repo, shas, job, config):
        proc = on_box("bisect", "--repo", repo, "--good", shas[0], "--bad", shas[2], "--build", "sh build.sh",
                      "--kernel", "arch/x86/boot/bzImage", "--on", "testbox", "--job", job,
                      "--metric", "kernel.abi", timeout=6 * 3600,
                      # This box's own lock: another session's box is also `testbox` (ssh alias, port 22).
                      env={"PERFLAB_CONFIG": str(config), "PERFLAB_MACHINE_LOCKS": str(tmp_path / "locks")})
        assert f"first bad commit: {shas[1]}" in proc.stdout, (proc.stdout, proc.stderr[-3000:])
        runs = on_box.sql('SELECT r."commit", r.status, r.params, e.facts FROM run r '
                          'JOIN environment e ON e.id = r.environment_id')
        assert len(runs) >= 7, runs     # 3 of each end (exact by measurement) and the step
        _assert_kexec_runs(runs, shas)
        values = on_box.sql('SELECT r."commit", s.value FROM sample s JOIN run r ON r.id = s.run_id '
                            "WHERE s.metric = 'kernel.abi'")
        assert {(c, v) for c, v in values} == {(shas[0], 47.0), (shas[1], 50.0), (shas[2], 50.0)}
        assert f"testbox: back on its default kernel {DEFAULT} by kexec" in proc.stderr
        assert box.ssh("uname -r").stdout.strip() == DEFAULT
        assert box.ssh("ls /var/tmp/perflab-kernel").returncode != 0
        worktrees = subprocess.run(["git", "-C", str(repo), "worktree", "list"], capture_output=True, text=True)
        assert worktrees.stdout.count("\n") == 1, worktrees.stdout


def test_a_patch_series_of_a_kernel_tree_kexecs_each_patchs_kernel_on_the_box(on_box, box, tmp_path):
    """`perflab series --kernel IMAGE --on testbox` of the same tree posted as a series (c1, c2 on
    base c0): the series applied in perflab's clone, each measured commit's image built here and
    kexec'ed on the box (bisect's Measurer), the patch that changed the release named; the kind not
    labelled (icount counts in a guest only); the revert check left out (--no-revert: 3 more kexecs
    that the bisection's own steps already prove)."""
    import subprocess

    with release_bisection(box, tmp_path) as (repo, shas, job, config):
        mails = tmp_path / "mails"
        subprocess.run(["git", "-C", str(repo), "format-patch", "-q", "--base", shas[0], "--cover-letter", "-o",
                        str(mails), f"{shas[0]}..{shas[2]}"], check=True, capture_output=True)
        proc = on_box("series", "--repo", repo, "--mbox", mails, "--build", "sh build.sh", "--kernel",
                      "arch/x86/boot/bzImage", "--on", "testbox", "--job", job, "--metric", "kernel.abi",
                      "--no-revert", timeout=6 * 3600,
                      env={"PERFLAB_CONFIG": str(config), "PERFLAB_MACHINE_LOCKS": str(tmp_path / "locks")})
        assert "the patch: [PATCH 1/2] c1 (1 of 2)" in proc.stdout, (proc.stdout, proc.stderr[-3000:])
        assert "kind of change: not labelled (the steps ran on an SSH machine; icount counts in a guest only)" \
            in proc.stderr, proc.stderr[-3000:]
        runs = on_box.sql('SELECT r."commit", r.status, r.params, e.facts FROM run r '
                          'JOIN environment e ON e.id = r.environment_id')
        # The base is c0 itself; the patches are applied anew in perflab's clone (their own commits).
        assert len({c for c, *_ in runs}) == 3 and len(runs) >= 7, runs
        _assert_kexec_runs(runs, shas)
        values = on_box.sql('SELECT r."commit", s.value FROM sample s JOIN run r ON r.id = s.run_id '
                            "WHERE s.metric = 'kernel.abi'")
        assert {v for c, v in values if c == shas[0]} == {47.0} and {v for c, v in values if c != shas[0]} == {50.0}
        _box_left_clean(proc, box, repo)


def test_a_lab_worker_of_the_box_bisects_a_kernel_tree_kexecing_each_commit(on_box, box, redis_server, tmp_path):
    """`perflab bisect --box testbox --kernel IMAGE` to the worker that drives the box (`perflab worker
    --machine testbox`): the worker fetches each commit and builds its kernel in its own checkout (the
    one kernel build path, the builds kept per repository), then kexecs it on the box as `bisect --on
    testbox --kernel` does from a controller; the same tree and exact metric as the test above.
    Measured once (load average 7-16, three simulated boxes of three sessions): 3,318 s with the
    box's boot and 6.1.0-50's dpkg -i; 7 runs or more, the first kexec 803 s from request to the box up."""
    import subprocess

    import test_lab_ssh
    from test_lab import Lab

    with release_bisection(box, tmp_path) as (repo, shas, job, config):
        lab = Lab(tmp_path, redis_server.url, str(tmp_path / "shared.db"))
        lab.env.update(PERFLAB_CONFIG=str(config), PERFLAB_MACHINE_LOCKS=str(tmp_path / "locks"))
        try:
            test_lab_ssh._start_machine_worker(lab, "testbox")
            proc = lab.perflab("bisect", "--repo", repo, "--good", shas[0], "--bad", shas[2], "--build", "sh build.sh",
                               "--kernel", "arch/x86/boot/bzImage", "--box", "testbox", "--job", job,
                               "--metric", "kernel.abi", "--db", lab.db, check=False, timeout=6 * 3600)
        finally:
            lab.stop()
        assert f"first bad commit: {shas[1]}" in proc.stdout, (proc.stdout, proc.stderr[-3000:], lab.logs()[-3000:])
        store, runs = test_lab_ssh._runs(lab)
        assert len(runs) >= 7, runs
        _assert_kexec_runs([(r.commit, r.status, r.params, test_lab_ssh._facts(r)) for r in runs], shas)
        assert {r.box for r in runs} == {"testbox"}
        commit_of = {r.id: r.commit for r in runs}
        values = {(commit_of[s.run_id], s.value) for s in store.samples(list(commit_of)) if s.metric == "kernel.abi"}
        assert values == {(shas[0], 47.0), (shas[1], 50.0), (shas[2], 50.0)}
        # Built on the worker, in its checkout: each commit's image kept there, nothing in the user's tree.
        assert {p.name for p in lab.spool("testbox").glob("src/kernel-*/images/*")} >= {shas[0], shas[1]}
        worktrees = subprocess.run(["git", "-C", str(repo), "worktree", "list"], capture_output=True, text=True)
        assert worktrees.stdout.count("\n") == 1, worktrees.stdout
        assert box.ssh("uname -r").stdout.strip() == DEFAULT
        assert box.ssh("ls /var/tmp/perflab-kernel").returncode != 0


# A kernel tree's build as kbuild's bindeb-pkg leaves it: the commit's linux-image package (a real
# one: Debian's 6.1.0-50, or the box recipe's, built by make bindeb-pkg) in the parent of
# $KBUILD_OUTPUT.
DEB_BUILD = """set -e
mkdir -p "$KBUILD_OUTPUT"
cp "$(cat kernel.txt)" "$KBUILD_OUTPUT/../linux-image-commit_1_amd64.deb"
"""
# The release the job reads on the box: 6.1.0-50-amd64 -> 0, 6.1.192-box -> 192 (exact).
SUBLEVEL_JOB = {"benchmark": "cmd", "params": {"command": "uname -r", "metrics": [
    {"name": "kernel.sublevel", "pattern": "^6\\.1\\.(\\d+)", "direction": 1}]}, "on": "testbox", "runs": 1}


def _box_recipe_deb(tmp_path, monkeypatch):
    """The box recipe's package (make bindeb-pkg of linux-source-6.1; minutes the first time, then
    kept in the user's cache as the box's image is), or None without the source."""
    from perflab.execution.vm import recipe

    spec = testbox.box_recipe(tmp_path / "box.yaml")
    if spec is None:
        return None
    monkeypatch.setenv("XDG_CACHE_HOME", str(testbox.cache_home().parent))
    return recipe.build(recipe.recipe_of(recipe.read_recipe_file(str(spec))), package=True).image


def test_each_commits_package_is_installed_kexeced_and_purged_on_the_box(box, tmp_path, monkeypatch):
    """`--kernel '../linux-image-*.deb' --on testbox` of a kernel tree (bisect, series): each commit's
    build leaves a linux-image package; it is kept with the commit, dpkg -i'd on the box (its
    modules and initramfs by the box's own hooks), kexec'ed, `uname -r` the package's release, the
    job run there, the box back on its default kernel and the package purged, commit after commit.
    Measured through the Measurer bisect and series use (each end of a bisection would be 3 such
    switches: minutes each under TCG here)."""
    from perflab.automate.measurer import KernelBuilds, LocalMeasurer, ScratchTree, kernel_spec
    from perflab.execution.targets import kexec
    from perflab.jobs import resolve
    from perflab.store import open_store

    box_deb = _box_recipe_deb(tmp_path, monkeypatch)
    if box_deb is None:
        pytest.skip("no linux-source-6.1 (apt-get install linux-source-6.1 flex bison)")
    debs = (kexec.debian_deb(f"debian:{OTHER}"), box_deb)
    releases = [kexec.package_of(d).release for d in debs]
    assert releases == [OTHER, "6.1.192-box"]
    repo = tmp_path / "linux"
    shas = kernel_tree(repo, list(debs), DEB_BUILD)
    config = tmp_path / "slow-box.toml"
    config.write_text(box.machine_config("testbox", boot_timeout=2400))
    monkeypatch.setenv("PERFLAB_CONFIG", str(config))
    monkeypatch.setenv("PERFLAB_MACHINE_LOCKS", str(tmp_path / "locks"))
    job = resolve(dict(SUBLEVEL_JOB))
    spec = kernel_spec("../linux-image-*.deb", None, job)
    assert spec.on == "testbox" and spec.image == "../linux-image-*.deb"
    store = open_store(str(tmp_path / "perflab.db"))
    base = tmp_path / "kernels"
    builds = KernelBuilds(repo, base / "src", base / "out", base / "images", "sh build.sh", spec.image)
    measurer = LocalMeasurer(store, ScratchTree(repo, ""), kernel=spec, builds=builds)
    try:
        for sha, deb, release in zip(shas, debs, releases):
            before = box.ssh("cat /proc/sys/kernel/random/boot_id").stdout.strip()
            (got,) = measurer.measure(sha, [job.with_(kernel=None)])
            assert got.status == "done", got.error
            assert got.values["kernel.sublevel"] == [float(release.split(".")[2].split("-")[0])]
            (run_id,) = got.runs
            run = store.get_run(run_id)
            facts = run.environment if isinstance(run.environment, dict) else json.loads(run.environment)
            # Its own package, with its modules and the initramfs the box's hooks made.
            assert facts["kernel_release"] == release and facts["kexec_release"] == release
            assert facts["kexec_package"] == kexec.package_of(deb).name
            assert facts["kexec_initrd"] == f"/boot/initrd.img-{release}"
            assert facts["kexec_default_kernel"] == DEFAULT
            assert run.params["kernel"] == "../linux-image-*.deb" and run.params["on"] == "testbox"
            # Back on the default kernel, the package purged, nothing of ours left.
            assert box.ssh("uname -r").stdout.strip() == DEFAULT
            assert box.ssh("cat /proc/sys/kernel/random/boot_id").stdout.strip() != before
            assert box.ssh(f"dpkg-query -W -f='${{Status}}' {kexec.package_of(deb).name}").stdout.strip() in (
                "", "unknown ok not-installed")
            assert box.ssh(f"ls /boot/vmlinuz-{release} /var/tmp/perflab-kernel").returncode != 0
            # The package is kept with its commit; the build's other files are gone from the build's parent.
            assert (base / "images" / sha / "linux-image.deb").is_file()
            assert not list(base.glob("*.deb"))
    finally:
        measurer.close()


def test_perf_is_asked_for_on_the_kernel_under_test_after_the_kexec(on_box, box):
    """A perf monitor with --kernel: the machine's perf is asked for once the box runs the kernel
    under test (Debian's perf is the running kernel's), not on its default kernel before the switch:
    the box has none, so the run is refused in one line naming that kernel, after the kexec; the box
    back on its default kernel and the package purged all the same."""
    from perflab.execution.targets import kexec

    deb = kexec.debian_deb(f"debian:{OTHER}")
    before = box.ssh("cat /proc/sys/kernel/random/boot_id").stdout.strip()
    assert box.ssh("command -v perf").returncode != 0          # the box has no perf
    proc = _wis(on_box, "--on", "testbox", "--kernel", str(deb), "--monitor", "perf-stat", check=False)
    assert proc.returncode != 0
    # One error line naming the kernel (the other lines are the switch's progress, said on stderr).
    errors = [line for line in proc.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert f"perf on the kernel under test {OTHER} ({deb}) of testbox: testbox has no perf on its PATH" \
        in errors[0], errors
    # It was asked there: the box kexec'ed, then came back by kexec.
    assert f"testbox: back on its default kernel {DEFAULT} by kexec" in proc.stderr
    assert box.ssh("uname -r").stdout.strip() == DEFAULT
    assert box.ssh("cat /proc/sys/kernel/random/boot_id").stdout.strip() != before
    assert box.ssh(f"dpkg-query -W -f='${{Status}}' {PACKAGE}").stdout.strip() in ("", "unknown ok not-installed")
    assert not on_box.db.exists() or on_box.sql("SELECT count(*) FROM sample") == [(0,)]


def _box_left_clean(proc, box, repo) -> None:
    """The box back on its default kernel by kexec, no image left there, no worktree left here."""
    import subprocess

    assert f"testbox: back on its default kernel {DEFAULT} by kexec" in proc.stderr
    assert box.ssh("uname -r").stdout.strip() == DEFAULT
    assert box.ssh("ls /var/tmp/perflab-kernel").returncode != 0
    worktrees = subprocess.run(["git", "-C", str(repo), "worktree", "list"], capture_output=True, text=True).stdout
    assert worktrees.strip().count("\n") == 0, worktrees


# The robot watches for a regression: the release read is a cost here (47 -> 50 is +6.4%), three
# repetitions per tested commit (one kexec each), so that each side is exact by measurement.
ROBOT_JOB = RELEASE_JOB.replace("direction: 1", "direction: -1") + "runs: 3\n"


def test_the_robot_kexecs_each_new_commits_kernel_on_the_box_and_mails_the_culprit(on_box, box, tmp_path):
    """`perflab robot --once --kernel IMAGE --on testbox`: the first pass measures c0 (--start) and the
    tip c2, each commit's kernel kexec'ed on the box by the Measurer bisect uses; the regression
    (47 -> 50) is bisected there to c1 and mailed once, its reproduce steps building each side's
    kernel into $KBUILD_OUTPUT and running the job on the box kexec'ed into it — run as written,
    they measure both sides there again and see the same change."""
    import os
    import subprocess

    from conftest import PERFLAB

    with release_bisection(box, tmp_path) as (repo, shas, _, config):
        env = {"PERFLAB_CONFIG": str(config), "PERFLAB_MACHINE_LOCKS": str(tmp_path / "locks")}
        job = tmp_path / "robot.yaml"
        job.write_text(ROBOT_JOB)
        out = tmp_path / "reports"
        proc = on_box("robot", "--repo", repo, "--job", job, "--build", "sh build.sh", "--kernel",
                      "arch/x86/boot/bzImage", "--on", "testbox", "--start", shas[0], "--out", out, "--once",
                      "--no-revert", "--name", "box", timeout=6 * 3600, env=env)
        assert "2 commit(s) tested" in proc.stdout and "1 new report(s)" in proc.stdout, (proc.stdout,
                                                                                         proc.stderr[-3000:])
        (report,) = out.iterdir()
        text = report.read_text()
        assert report.name.startswith(shas[1][:12]) and f"commit: {shas[1]}" in text, text
        assert text.startswith(f"Subject: [perflab] {shas[1][:10]}: kernel.abi +6.4% regression"), text
        assert "on test machine: testbox:" in text, text
        runs = on_box.sql('SELECT r."commit", r.status, r.params, e.facts FROM run r '
                          'JOIN environment e ON e.id = r.environment_id')
        _assert_kexec_runs(runs, shas)
        tags = {t for (t,) in on_box.sql("SELECT DISTINCT tag FROM run")}
        assert "robot-box" in tags and any(t.startswith("bisect-") for t in tags), tags   # the bisection ran there
        _box_left_clean(proc, box, repo)

        # The mail's steps, run as a shell script in a fresh directory on a fresh store: each side's
        # kernel built into $KBUILD_OUTPUT, the job run on the box kexec'ed into it, the change seen again.
        from test_mail import _steps

        script = _steps(text, "To reproduce:")
        assert any(s.startswith("export KBUILD_OUTPUT=") for s in script), script
        assert sum('--kernel "$KBUILD_OUTPUT/arch/x86/boot/bzImage"' in s for s in script) == 2, script
        assert "'on': testbox" in script and not any(s.startswith("kernel:") for s in script), script
        reader = tmp_path / "reader"
        reader.mkdir()
        done = subprocess.run(["sh", "-ec", "\n".join(script)], cwd=reader, capture_output=True, text=True,
                              timeout=6 * 3600, env={**on_box.env, **env, "PERFLAB_DB": str(tmp_path / "reader.db"),
                                                     "PATH": f"{os.path.dirname(PERFLAB)}:{os.environ['PATH']}"})
        assert done.returncode == 0, (script, done.stderr[-3000:])
        assert "kernel.abi" in done.stdout.split("-- regressions --")[1], done.stdout
        import sqlite3

        con = sqlite3.connect(tmp_path / "reader.db")
        seen = con.execute('SELECT r."commit", s.value FROM sample s JOIN run r ON r.id = s.run_id '
                           "WHERE s.metric = 'kernel.abi'").fetchall()
        con.close()
        assert {(c, v) for c, v in seen} == {(shas[0], 47.0), (shas[1], 50.0)}, seen
