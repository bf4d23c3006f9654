"""What a job may add to QEMU's command line (issue 31, H1 and M1; docs/lab.md).

A job's `vm.qemu_args` reach a lab box's QEMU: `-pidfile PATH` deletes PATH when QEMU exits,
`-fsdev ... -device virtio-9p-pci` hands the guest a writable host directory, `-monitor tcp:`
opens QEMU's monitor on a port. Only options that shape the machine are taken, with values
naming no host resource; the rest is refused in one line before anything boots — from a job
file, and from a stored or imported run that `rerun` would run again.

The refusals are checked where a real QEMU and a Debian kernel are installed, so that without
them the guest would really boot and the planted file would really be deleted.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from conftest import CLI, assert_one_line_error
from perflab.execution.vm import kernel, qemu_args_refusal

pytestmark = pytest.mark.vm

KERNEL = os.environ.get("PERFLAB_TEST_KERNEL") or kernel.cached()
needs_vm = pytest.mark.skipif(
    shutil.which("qemu-system-x86_64") is None or not KERNEL or not Path(KERNEL).is_file(),
    reason="needs qemu-system-x86_64 (Debian qemu-system-x86) and a kernel: python tools/fetch_kernel.py")


@pytest.mark.parametrize("args", [
    ["-machine", "q35"], ["-M", "pc"], ["-cpu", "max,+avx2"], ["-device", "virtio-rng-pci"],
    ["-global", "kvm-pit.lost_tick_policy=discard"], ["-rtc", "base=utc,clock=vm"], ["--machine", "q35"], [],
    ["-global", "driver=ICH9-LPC,property=disable_s3,value=1"], ["-device", "driver=e1000,id=nic1"],
    ["-device", "virtio-balloon-pci,id=b"],
])
def test_options_that_shape_the_machine_are_taken(args):
    assert qemu_args_refusal(args) is None


@pytest.mark.parametrize("args, needle", [
    (["-pidfile", "/etc/passwd"], "'-pidfile' is not allowed"),
    (["-monitor", "tcp:127.0.0.1:4444,server,nowait"], "'-monitor' is not allowed"),
    (["-qmp", "unix:sock,server"], "'-qmp' is not allowed"),
    (["-fsdev", "local,id=x,path=/tmp,security_model=none"], "'-fsdev' is not allowed"),
    (["-virtfs", "local,path=/tmp,mount_tag=x,security_model=none"], "'-virtfs' is not allowed"),
    (["-chardev", "file,id=c,path=x"], "'-chardev' is not allowed"),
    (["-drive", "file=disk.img"], "'-drive' is not allowed"),
    (["-netdev", "user,id=n"], "'-netdev' is not allowed"),
    (["-object", "memory-backend-file,id=m,mem-path=/dev/shm/x"], "'-object' is not allowed"),
    (["-plugin", "libinsn.so"], "'-plugin' is not allowed"),
    (["-device", "virtio-9p-pci,fsdev=hostroot,mount_tag=rw"], "key 'fsdev'"),
    (["-device", "e1000,romfile=pxe.rom"], "key 'romfile'"),
    (["-device", "isa-serial,chardev=agent"], "key 'chardev'"),
    (["-global", "virtio-blk-pci.drive=d"], "key 'drive'"),
    (["-machine", "q35,accel=kvm"], "key 'accel'"),
    (["-machine", "pc,kernel=bzImage"], "key 'kernel'"),
    (["-cpu", "/etc/shadow"], "a path"),
    (["-smp", "8"], "set by perflab from vm.cpus"),
    (["-m", "4G"], "set by perflab from vm.memory"),
    (["-accel", "kvm"], "set by perflab from vm.mode"),
    (["-append", "init=/bin/sh"], "set by perflab from the kernel command line"),
    (["-machine"], "needs a value"),
    (["q35"], "'q35' is not allowed"),
    # Issue 45, F2: a loader device whose file a -global names reads a host file into the guest.
    (["-global", "driver=loader,property=file,value=secret.bin"],
     "-global 'driver=loader,property=file,value=secret.bin': loader.file is not one a job may set"),
    (["-global", "loader.file=secret.bin"], "key 'file'"),
    (["-global", "loader.addr=4096"], "loader.addr is not one a job may set"),
    (["-global", "kvm-pit.lost_tick_policy=a:b,x=y"], "is not a plain word or number"),
    (["-global", "kvm-pit"], "expected DRIVER.PROPERTY=VALUE"),
    (["-device", "loader,addr=0x1000,force-raw=on"], "device 'loader' is not one a job may add"),
    (["-device", "driver=loader,addr=0x1000"], "device 'loader' is not one a job may add"),
    (["-device", "vhost-vsock-pci,guest-cid=3"], "device 'vhost-vsock-pci' is not one a job may add"),
    (["-device", "vfio-pci,sysfsdev=x"], "key 'sysfsdev'"),
    (["-device", "usb-mtp,rootdir=."], "key 'rootdir'"),
    (["-device", '{"driver": "loader", "addr": 4096}'], "without JSON"),
    (["-device", "virtio-rng-pci,x=a,,file=s"], "doubled commas"),
    (["-device", "virtio-rng-pci,id=a,,b"], "doubled commas"),
])
def test_options_that_reach_the_host_or_override_perflab_are_refused(args, needle):
    why = qemu_args_refusal(args)
    assert why is not None and needle in why, why


@needs_vm
def test_a_job_file_cannot_make_qemu_delete_a_host_file(cli, tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("keep me\n")
    job = tmp_path / "job.yaml"
    job.write_text(f"benchmark: cmd\ncommand: true\nruns: 1\nkernel: {KERNEL}\n"
                   f"vm: {{mode: tcg, qemu_args: [-pidfile, {victim}]}}\n")
    proc = cli("run", job, check=False, timeout=300)
    assert_one_line_error(proc, "job.yaml", "vm.qemu_args", "'-pidfile' is not allowed")
    assert victim.read_text() == "keep me\n"
    assert not cli.db.exists() or cli.sql("SELECT count(*) FROM run") == [(0,)]


@needs_vm
def test_an_imported_run_cannot_smuggle_qemu_options_into_rerun(cli, tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("keep me\n")
    cli("run", "cmd", "--runs", "1", "--", "true")
    doc = json.loads(cli("export").stdout)
    job = doc["runs"][0]["job"]
    job["kernel"] = str(KERNEL)
    job["vm"] = {"mode": "tcg", "cpus": 1, "memory": 512, "qemu_args": ["-pidfile", str(victim)]}
    (tmp_path / "from-elsewhere.json").write_text(json.dumps(doc))

    other = CLI(tmp_path / "other.db", tmp_path)
    other("import", tmp_path / "from-elsewhere.json")
    # What the run would give QEMU is shown, not hidden.
    shown = other("show", "1").stdout
    assert f"qemu_args -pidfile {victim}" in shown, shown
    proc = other("rerun", "1", check=False, timeout=300)
    assert_one_line_error(proc, "perflab rerun 1", "vm.qemu_args", "'-pidfile' is not allowed")
    assert victim.read_text() == "keep me\n"
    assert other.sql("SELECT count(*) FROM run") == [(1,)]


@needs_vm
@pytest.mark.parametrize("memory, mib", [("1024", 1024), (2048.0, 2048), (" 768 ", 768), ("1G", 1024), (512, 512)])
def test_a_bare_number_of_memory_is_mib_however_it_is_written(memory, mib):
    """Issue 31 L4: "1024" and 2048.0 were read as bytes (then refused as under 64 MiB)."""
    from perflab.jobs.guest import normalize

    assert normalize("cmd", str(KERNEL), {"memory": memory}, "j.yaml", None)[1]["memory"] == mib


@needs_vm
def test_a_fraction_of_a_mib_is_refused_saying_why():
    from perflab.jobs import JobError
    from perflab.jobs.guest import normalize

    with pytest.raises(JobError, match="whole number of MiB"):
        normalize("cmd", str(KERNEL), {"memory": 2048.5}, "j.yaml", None)


@needs_vm
def test_a_guest_command_runs_in_the_directory_perflab_was_started_in(cli):
    """Issue 31 M5: `perflab run cmd --kernel K -- ./prog.sh` ran in the guest's / and said "cannot
    start './prog.sh'", where the host run works. A directory outside /tmp (which the guest mounts
    its own of) is the host's, over 9p."""
    import subprocess
    import tempfile

    from conftest import PERFLAB

    where = Path(tempfile.mkdtemp(prefix="perflab-m5-", dir="/var/tmp"))
    try:
        (where / "prog.sh").write_text("#!/bin/sh\ntest -f prog.sh\n")
        (where / "prog.sh").chmod(0o755)
        proc = subprocess.run([PERFLAB, "run", "cmd", "--kernel", str(KERNEL), "--vm", "tcg", "--runs", "1", "--",
                               "./prog.sh"], cwd=where, env=cli.env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
        assert cli.sql("SELECT status FROM run") == [("finished",)]
    finally:
        shutil.rmtree(where, ignore_errors=True)


def test_the_boot_timeout_is_the_boxs_and_a_bad_one_is_refused(monkeypatch):
    from perflab.jobs import JobError
    from perflab.jobs.guest import BOOT_TIMEOUT_ENV, boot_timeout

    monkeypatch.setenv(BOOT_TIMEOUT_ENV, "300")
    assert boot_timeout() == 300.0
    monkeypatch.delenv(BOOT_TIMEOUT_ENV)
    assert boot_timeout() == 60.0
    for bad in ("soon", "0", "-5", "nan", "1e9"):
        monkeypatch.setenv(BOOT_TIMEOUT_ENV, bad)
        with pytest.raises(JobError, match=BOOT_TIMEOUT_ENV):
            boot_timeout()


def test_a_loader_and_a_vhost_device_are_refused_where_the_job_is_read():
    """Issue 45, F2: `-global driver=loader,property=file,value=secret.bin` with `-device loader`
    loaded a file of QEMU's working directory into guest memory; `-device vhost-vsock-pci` opened
    the host's /dev/vhost-vsock. Both are refused when the vm block is read, naming the value."""
    from perflab.core.errors import UsageProblem
    from perflab.execution.targets.qemu import machine_of

    with pytest.raises(UsageProblem) as caught:
        machine_of({"qemu_args": ["-global", "driver=loader,property=file,value=secret.bin",
                                  "-device", "loader,addr=0x1000,force-raw=on"]}, "job.yaml")
    assert str(caught.value).startswith("job.yaml: key 'vm.qemu_args': -global 'driver=loader,property=file")
    with pytest.raises(UsageProblem, match="'vhost-vsock-pci,guest-cid=3'.*not one a job may add"):
        machine_of({"qemu_args": "-device vhost-vsock-pci,guest-cid=3"}, "job.yaml")
