"""A job that changes a shared guest for the jobs after it (issue 45, G6).

Jobs on one kernel and machine share a boot. A job that bind-mounted /bin/true over
/usr/bin/md5sum made the next job's `md5sum` store "ok" at 0.094 s (14.07 s before), and
nothing said the second job ran in a guest the first had changed. Now the guest's mounts and
the files of its root outside the jobs' own directories are read before each job of a shared
boot; a later job records what changed and by which job (`vm_guest_changed`), and says so.
One boot (TCG) for the whole test.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from perflab.execution.targets.qemu import GuestState
from perflab.execution.vm import kernel

pytestmark = pytest.mark.vm

KERNEL = os.environ.get("PERFLAB_TEST_KERNEL") or kernel.cached()
needs_vm = pytest.mark.skipif(
    shutil.which("qemu-system-x86_64") is None or not KERNEL or not Path(KERNEL).is_file()
    or shutil.which("busybox") is None,
    reason="needs qemu-system-x86_64, busybox-static and a kernel: python tools/fetch_kernel.py")

MOUNTINFO = """22 1 0:20 / / rw - rootfs rootfs rw
23 22 0:21 / /proc rw,relatime - proc proc rw
30 22 0:30 / /host ro - 9p hostroot ro,trans=virtio
"""


def test_a_mount_and_a_file_outside_the_jobs_directories_are_changes():
    before = GuestState.parse(MOUNTINFO + "@@files\n/work/job1/out.txt\n")
    after = GuestState.parse(MOUNTINFO + "41 30 0:30 /usr/bin/true /host/usr/bin/md5sum ro - 9p hostroot ro\n"
                             "@@files\n/work/job1/out.txt\n/work/job2/log\n/usr/lib/perflab/launch\n")
    changes = after.changes(before, own=("/work/job2",))
    assert changes == ["mount on /host/usr/bin/md5sum (9p hostroot, /usr/bin/true)", "file /usr/lib/perflab/launch"]
    assert GuestState.parse(MOUNTINFO + "@@files\n").changes(before, own=()) == []


@needs_vm
def test_a_job_after_one_that_mounted_over_a_program_records_the_changed_guest(cli, tmp_path):
    job = tmp_path / "two.yaml"
    job.write_text(f"benchmark: cmd\nkernel: {KERNEL}\nvm: {{mode: tcg}}\nruns: 1\n"
                   "command: ['mount --bind /bin/true /usr/bin/md5sum', 'md5sum /etc/hostname']\n")
    proc = cli("run", job, timeout=900)
    facts = [json.loads(f) for f, in cli.sql("SELECT e.facts FROM run r JOIN environment e ON e.id = r.environment_id "
                                             "ORDER BY r.id")]
    assert [(f["vm_boot_job"], f["vm_boot_jobs"]) for f in facts] == [("1", "2"), ("2", "2")]
    assert "vm_guest_changed" not in facts[0]
    changed = facts[1]["vm_guest_changed"]
    assert changed.startswith("by job 1 of this boot: mount on /host/usr/bin/md5sum"), changed
    assert "job 2 of 2 in this boot runs in a guest changed by job 1" in proc.stderr, proc.stderr
