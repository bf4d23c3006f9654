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
