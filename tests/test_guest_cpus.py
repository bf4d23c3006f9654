"""Shares of the CPUs (`nr_task: 50%`) and per-CPU defaults of a job in a VM guest are the guest's vCPUs.

A guest job's parameters are parsed (perflab.jobs.resolve) and its session entered
(the job's target: perflab.execution.targets.qemu.Qemu.preparing) with the job's CPUs set to its `vm.cpus`; a host job's are
this process's affinity, as before. Only the last test boots a guest (marked vm).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from perflab.core.params import cpu_ids, cpus_available, job_cpus
from perflab.execution.vm import kernel
from perflab.execution import targets
from perflab.jobs import atomic, expand_atomic, resolve, retarget
from perflab.execution.targets import qemu

HOST = len(os.sched_getaffinity(0))
WIS = {"benchmark": "will-it-scale", "test": "getppid1"}


def _guest(doc: dict, cpus: int | None) -> dict:
    # normalize does not look at the kernel file (the target's check does): any path will do here.
    vm = {"cpus": cpus} if cpus is not None else {}
    return {**doc, "kernel": "/nonexistent/vmlinuz", "vm": vm}


@pytest.mark.parametrize("cpus, tasks", [(1, 1), (4, 4), (None, 1)])
def test_a_share_of_the_cpus_is_one_of_the_guests_vcpus(cpus, tasks):
    (job,) = expand_atomic(_guest({**WIS, "nr_task": "100%"}, cpus), "j.yaml")
    assert job.parsed.nr_task == tasks
    assert job.params["nr_task"] == "100%"       # the job keeps what the user wrote


def test_a_host_job_keeps_the_hosts_cpus():
    (job,) = expand_atomic({**WIS, "nr_task": "100%"}, "j.yaml")
    assert job.parsed.nr_task == HOST and not job.in_guest
    assert atomic("will-it-scale", {"test": "getppid1", "nr_task": "100%"}).parsed.nr_task == HOST


def test_an_axis_of_shares_is_told_apart_by_the_guests_cpus():
    jobs = expand_atomic(_guest({**WIS, "nr_task": [1, "50%", "100%"]}, 4), "j.yaml")
    assert [j.parsed.nr_task for j in jobs] == [1, 2, 4]
    jobs = expand_atomic(_guest({**WIS, "nr_task": [1, "50%", "100%"]}, 1), "j.yaml")
    assert [j.parsed.nr_task for j in jobs] == [1]     # all three mean one task on one vCPU


def test_a_familys_per_cpu_default_is_the_guests():
    (job,) = expand_atomic(_guest({"benchmark": "ebizzy"}, 3), "j.yaml")
    assert job.parsed.nr_threads == 6                   # ebizzy: 2 threads per CPU
    (host,) = expand_atomic({"benchmark": "ebizzy"}, "j.yaml")
    assert host.parsed.nr_threads == 2 * HOST


def test_code_and_kernel_option_and_stored_jobs_resolve_against_the_guest():
    made = atomic("will-it-scale", {"test": "getppid1", "nr_task": "100%"}, kernel="/k/vmlinuz", vm={"cpus": 3})
    assert made.parsed.nr_task == 3
    # --kernel over a job file without one: parsed again for the guest (1 vCPU by default)
    (on_host,) = expand_atomic({**WIS, "nr_task": "100%"}, "j.yaml")
    keys = targets.option_keys({"kernel": "/k/vmlinuz", "vm_mode": None})      # as run's options give them
    moved = retarget(on_host, targets.placed(on_host.target.keys(), keys), "perflab run j.yaml")
    assert moved.parsed.nr_task == 1 and moved.vm["cpus"] == 1
    # a stored run's job (rerun, a lab worker)
    assert resolve(made.to_dict()).parsed.nr_task == 3


def test_the_context_is_the_hosts_outside_a_guest_job():
    assert cpus_available() == HOST and cpu_ids() == sorted(os.sched_getaffinity(0))
    with job_cpus(4):
        assert cpus_available() == 4 and cpu_ids() == [0, 1, 2, 3]
    assert cpus_available() == HOST
    (job,) = expand_atomic(_guest({**WIS, "nr_task": 1}, 4), "j.yaml")
    with job.target.preparing(job.family.needs, job.benchmark):
        assert cpu_ids() == [0, 1, 2, 3]
    (host,) = expand_atomic({**WIS, "nr_task": 1}, "j.yaml")
    with host.target.preparing(host.family.needs, host.benchmark):
        assert cpu_ids() == sorted(os.sched_getaffinity(0))


def test_the_runs_cpu_facts_are_the_guests():
    facts = qemu.environment_facts({"vm_cpus": "3", "vm_memory_mib": "256", "vm_cpu_model": "QEMU TCG"})
    assert facts["cpu_threads"] == 3 and facts["cpu_cores"] == 3 and facts["cpu_model"] == "QEMU TCG"


KERNEL = os.environ.get("PERFLAB_TEST_KERNEL") or kernel.cached()


@pytest.mark.vm
@pytest.mark.skipif(shutil.which("qemu-system-x86_64") is None or not KERNEL or not Path(KERNEL).is_file(),
                    reason="needs qemu-system-x86_64 (Debian qemu-system-x86) and a kernel: python tools/fetch_kernel.py")
def test_all_the_cpus_of_a_one_vcpu_guest_is_one_task(cli, tmp_path):
    import json

    job = tmp_path / "wis.yaml"
    job.write_text(f"benchmark: will-it-scale\nkernel: {KERNEL}\nvm: {{mode: tcg, cpus: 1, memory: 256M}}\nruns: 1\n"
                   "test: getppid1\nnr_task: 100%\nbind: true\nduration: 0.3\nwarmup_time: 0.1\ninterval: 0.1\n")
    out = cli("run", job, timeout=600)   # a backstop: the boot's own limit (60 s) fails a hung guest first
    assert "will-it-scale getppid1 process x1" in out.stdout
    (params, facts), = cli.sql("SELECT r.params, e.facts FROM run r JOIN environment e ON e.id = r.environment_id "
                               "WHERE r.id = 1")
    params, facts = json.loads(params), json.loads(facts)
    assert params["nr_task"] == 1 and params["vm"] == "tcg"
    assert facts["cpu_threads"] == facts["cpu_cores"] == 1 and facts["vm_cpus"] == "1"
    assert facts["placement"] == "task i bound to CPU cpus[i mod 1] of [0]"
