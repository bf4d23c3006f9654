"""The 0-day mail for kernel runs (issue 33): each side's kernel, the guest's figures, no nan."""

from __future__ import annotations

from perflab.analysis import regression
from perflab.core.model import HIGHER_IS_BETTER, Sample
from perflab.report.regression import render
from perflab.store import open_store

PARAMS = {"test": "getppid1", "mode": "process", "nr_task": 1}


def _side(store, release: str, ops: float) -> None:
    image = f"/boot/vmlinuz-{release}"
    job = {"benchmark": "will-it-scale", "params": PARAMS, "runs": 2, "kernel": image,
           "vm": {"mode": "icount", "cpus": 1, "memory": 512, "qemu_args": []}}
    env = {"testbox": "box1", "kernel_release": release, "vm_mode": "icount", "vm_cpus": "1",
           "vm_memory_mib": "512", "memory_kib": 512 * 1024, "kernel_path": image,
           "kernel_cmdline": "console=ttyS0 quiet", "cpu_model": "Test CPU"}
    run = store.create_run(box="box1", environment=env, benchmark="will-it-scale", name="getppid1",
                           params={**PARAMS, "vm": "icount"}, tag=release, job=job)
    for rep in range(2):
        store.add_samples(run, rep, [Sample("will-it-scale.per_process_ops", ops, "ops/s (icount)",
                                            HIGHER_IS_BETTER, exact=True)])
    store.finish_run(run, "finished")


def test_kernel_mail_names_each_sides_kernel_and_the_guest(tmp_path):
    store = open_store(str(tmp_path / "perflab.db"))
    _side(store, "6.1.0-47-amd64", 3046556)
    _side(store, "6.1.0-50-amd64", 3028048)
    text = render(regression.build(store, "tag=6.1.0-47-amd64", "tag=6.1.0-50-amd64", mail={}))
    assert "nan" not in text and "0G memory" not in text and "0.0%" not in text.split("Details")[0]
    assert "-0.6% regression" in text
    assert "QEMU icount guest, 1 vCPU, 512 MiB memory" in text
    assert "perflab run job.yaml --kernel /boot/vmlinuz-6.1.0-47-amd64 --tag 6.1.0-47-amd64" in text
    assert "perflab run job.yaml --kernel /boot/vmlinuz-6.1.0-50-amd64 --tag 6.1.0-50-amd64" in text
    assert "--repo" not in text and "build it as it was" not in text
    assert "runs: 2" in text or "runs:" not in text
    assert "mode: icount" in text and "guest command line: console=ttyS0 quiet" in text


def _machine_side(store, commit: str, release: str, abi: float, image: str) -> None:
    """A run of a kernel tree's commit kexec'ed on box1 (bisect/series/robot --kernel IMAGE --on box1):
    the job keeps the commit's own image file, the parameter `kernel` the image's path in the build."""
    job = {"benchmark": "cmd", "params": {"command": "uname -r", "metrics": [
        {"name": "kernel.abi", "pattern": "^6\\.1\\.0-(\\d+)-amd64", "direction": -1}]}, "runs": 3,
        "on": "box1", "kernel": image}
    env = {"testbox": "box1", "kernel_release": release, "kexec_release": release, "cpu_model": "Test CPU",
           "cpu_threads": 4}
    run = store.create_run(box="box1", environment=env, benchmark="cmd", name="uname", commit=commit,
                           params={"command": "uname -r", "on": "box1", "kernel": "arch/x86/boot/bzImage"},
                           tag="robot-box", job=job)
    for rep in range(3):
        store.add_samples(run, rep, [Sample("kernel.abi", abi, "", -1)])
    store.finish_run(run, "finished")


def test_a_kernel_trees_mail_on_a_test_box_builds_and_kexecs_each_side(tmp_path):
    """The reproduce steps of runs whose kernels a kernel tree's build made and a test box was kexec'ed
    into: $KBUILD_OUTPUT named once, each side checked out, built there and run with --kernel
    "$KBUILD_OUTPUT/IMAGE" on the box of the job file (`on:`), not the image file perflab booted
    (a pass's build directory, gone); a kernel the user named (`run --on --kernel FILE`) stays as it was."""
    import subprocess

    from perflab.analysis.regression import tree_image

    repo = tmp_path / "linux"
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t",
           "PATH": "/usr/bin:/bin"}
    subprocess.run(["git", "init", "-q", str(repo)], check=True, env=env)
    shas = []
    for i in range(2):
        (repo / "n.txt").write_text(f"{i}\n")
        subprocess.run(["git", "-C", str(repo), "add", "-A"], check=True, env=env)
        subprocess.run(["git", "-C", str(repo), "commit", "-qm", f"c{i}"], check=True, env=env)
        shas.append(subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True,
                                   check=True).stdout.strip())
    store = open_store(str(tmp_path / "perflab.db"))
    pass_dir = "/tmp/perflab-robot-kernel-x/images"
    _machine_side(store, shas[0], "6.1.0-47-amd64", 47.0, f"{pass_dir}/{shas[0]}/bzImage")
    _machine_side(store, shas[1], "6.1.0-50-amd64", 50.0, f"{pass_dir}/{shas[1]}/bzImage")
    report = regression.build(store, f"commit={shas[0]}", f"commit={shas[1]}", repo=str(repo),
                              build_command="sh build.sh", mail={})
    assert report.kernel_image == "arch/x86/boot/bzImage" and report.kernels is None
    text = render(report)
    steps = text[text.index("To reproduce:"):text.index("perflab compare")]
    assert "export KBUILD_OUTPUT=$PWD/kbuild" in steps and pass_dir not in steps, steps
    assert "'on': box1" in steps and "kernel:" not in steps, steps     # YAML's own quotes: on is a word there
    for sha in shas:
        assert (f'(cd {repo} && perflab run "$OLDPWD/job.yaml" --kernel "$KBUILD_OUTPUT/arch/x86/boot/bzImage" '
                f"--repo . --tag {sha[:10]})") in steps, steps
    assert steps.index("export KBUILD_OUTPUT") < steps.index(f"(cd {repo} && sh build.sh)")
    assert "on test machine: box1: 4 threads Test CPU" in text
    # A patch series' mail of such runs (`series --kernel --on box1`): built and kexec'ed the same way.
    from dataclasses import replace

    from perflab.analysis.regression import SeriesFacts

    series = render(replace(report, series=SeriesFacts(patch="[PATCH 1/1] x", index=1, total=1, culprit=None,
                                                       mbox="series.mbox")))
    steps = series[series.index("To reproduce:"):]
    assert "export KBUILD_OUTPUT=$PWD/../kbuild" in steps and "'on': box1" in steps, steps
    assert steps.count('perflab run ../job.yaml --repo . --kernel "$KBUILD_OUTPUT/arch/x86/boot/bzImage"') == 2

    class Run:
        def __init__(self, params, job):
            self.params, self.job = params, job

    # A kernel named by the user, on the machine or in a guest: no tree's build to make it again.
    assert tree_image(Run({"on": "box1", "kernel": "debian:6.1.0-50-amd64"}, {"kernel": "debian:6.1.0-50-amd64"})) == ""
    assert tree_image(Run({"on": "box1", "kernel": "k/bzImage"}, {"on": "box1", "kernel": "k/bzImage"})) == ""
    assert tree_image(Run({"vm": "tcg"}, {"kernel": "/boot/vmlinuz"})) == ""
