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
