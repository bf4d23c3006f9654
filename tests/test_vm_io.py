"""Host programs and disks in a guest (issue 20, items 1-2): `cmd` and fio run the host's programs
from the host's root shared read-only over virtio-9p; fio, aim7 and news work on a virtio disk
formatted on the host (`fs:`), and the kernel's modules for it are loaded by perflab's agent.

Skipped with the reason when qemu-system-x86_64 or the Debian kernel with its modules
(tools/fetch_kernel.py) is absent. Three boots in TCG, about 15-20 s each on 2 cores.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
from pathlib import Path

import pytest

from conftest import assert_one_line_error
from perflab.core.errors import PerflabError
from perflab.execution.vm import kernel, modules

pytestmark = pytest.mark.vm

KERNEL = os.environ.get("PERFLAB_TEST_KERNEL") or kernel.cached()
RELEASE = modules.release_of(Path(KERNEL)) if KERNEL else None
needs_kernel = pytest.mark.skipif(
    not KERNEL or not RELEASE or modules.modules_dir(Path(KERNEL), RELEASE) is None,
    reason="needs a Debian kernel with its modules: python tools/fetch_kernel.py")
# How long a `perflab run` in a guest may take here: a backstop (the boot's own limit, 60 s, fails a
# hung guest first).
RUN_TIMEOUT = 600
needs_vm = pytest.mark.skipif(shutil.which("qemu-system-x86_64") is None or not KERNEL,
                              reason="needs qemu-system-x86_64 (Debian qemu-system-x86) and python tools/fetch_kernel.py")


def _facts(cli, run_id: int) -> dict:
    (facts,) = cli.sql("SELECT e.facts FROM run r JOIN environment e ON e.id = r.environment_id WHERE r.id = ?",
                       (run_id,))[0]
    return json.loads(facts)


# -- the kernel's pieces, read on the host ------------------------------------------------------

def test_the_release_is_read_from_the_setup_header(tmp_path):
    image = bytearray(0x600)
    image[0x202:0x206] = b"HdrS"
    struct.pack_into("<H", image, 0x20E, 0x300)
    image[0x500:0x520] = b"6.9.0-test (me@host) #1 SMP\0"
    (tmp_path / "bzImage").write_bytes(bytes(image))
    assert modules.release_of(tmp_path / "bzImage") == "6.9.0-test"
    (tmp_path / "junk").write_bytes(b"not a kernel")
    assert modules.release_of(tmp_path / "junk") is None


@needs_kernel
def test_modules_are_planned_with_their_dependencies_first():
    plan = modules.plan(KERNEL, ["9p", "disk", "ext4"], "test")
    names = [p.stem for p in plan.load]
    for before, after in (("virtio", "virtio_pci"), ("9pnet", "9pnet_virtio"), ("netfs", "9p"),
                          ("jbd2", "ext4"), ("crc32c_generic", "ext4"), ("virtio_pci", "virtio_blk")):
        assert names.index(before) < names.index(after), names
    assert len(names) == len(set(names))
    assert all(path.startswith(f"/lib/modules/{RELEASE}/kernel/") for path in plan.files())


@needs_kernel
def test_compressed_modules_are_planned_and_decompressed_on_the_host(tmp_path):
    """Debian's 6.12 kernels ship .ko.xz: found, their dependencies read, and put in the initramfs
    decompressed at the .ko path the agent loads (here the 6.1 kernel's modules, compressed)."""
    import gzip
    import lzma

    plain = modules.plan(KERNEL, ["9p", "disk", "ext4"], "test")
    root = tmp_path / "k"
    (root / "boot").mkdir(parents=True)
    image = root / "boot" / Path(KERNEL).name
    shutil.copy(KERNEL, image)
    shutil.copy(Path(KERNEL).parent / f"config-{RELEASE}", root / "boot" / f"config-{RELEASE}")
    for i, module in enumerate(plain.load):
        stored = root / "lib" / "modules" / RELEASE / module.relative_to(plain.directory)
        stored.parent.mkdir(parents=True, exist_ok=True)
        if i % 3 == 2:        # one in three gzip, the rest xz: both are read
            Path(f"{stored}.gz").write_bytes(gzip.compress(module.read_bytes()))
        else:
            Path(f"{stored}.xz").write_bytes(lzma.compress(module.read_bytes()))
    packed = modules.plan(image, ["9p", "disk", "ext4"], "test")
    assert [p.name.split(".ko")[0] for p in packed.load] == [p.stem for p in plain.load]
    assert packed.files() == {}
    assert packed.data() == {path: module.read_bytes() for path, module in plain.files().items()}
    # a damaged file is a one-line error naming it, before anything boots
    broken = next(iter((root / "lib").glob(f"**/{plain.load[0].name}.xz")))
    broken.write_bytes(b"not xz")
    with pytest.raises(PerflabError, match=f"{broken.name}: cannot decompress the module"):
        modules.plan(image, ["9p", "disk", "ext4"], "test")


@needs_kernel
def test_a_kernel_without_9p_or_its_modules_refuses_cmd_in_one_line_before_booting(cli, tmp_path):
    boot = tmp_path / "k" / "boot"
    boot.mkdir(parents=True)
    image = boot / Path(KERNEL).name
    shutil.copy(KERNEL, image)
    config = (Path(KERNEL).parent / f"config-{RELEASE}").read_text()
    (boot / f"config-{RELEASE}").write_text(config)
    # the config says =m, and no modules directory is beside the kernel (nor in /lib/modules)
    if not Path(f"/lib/modules/{RELEASE}").is_dir():
        proc = cli("run", "cmd", "--kernel", image, "--", "true", check=False)
        assert_one_line_error(proc, "CONFIG_VIRTIO_PCI=m but module virtio_pci.ko is not in")
    (tmp_path / "k" / "lib").symlink_to(Path(KERNEL).parent.parent / "lib")
    (boot / f"config-{RELEASE}").write_text(config.replace("CONFIG_9P_FS=m", "# CONFIG_9P_FS is not set"))
    proc = cli("run", "cmd", "--kernel", image, "--", "true", check=False)
    assert_one_line_error(proc, f"kernel {image.name} lacks CONFIG_9P_FS")
    with pytest.raises(PerflabError, match="lacks CONFIG_9P_FS"):
        modules.plan(image, ["9p"], "cmd")
    assert not cli.db.exists() or cli.sql("SELECT count(*) FROM run") == [(0,)]


@needs_vm
def test_what_a_guest_cannot_do_is_refused_in_one_line(cli):
    proc = cli("run", "kernbench", "--kernel", KERNEL, check=False)
    assert_one_line_error(proc, "kernbench cannot run in a VM guest")
    proc = cli("run", "fio", "--dir", cli.tmp, "--kernel", KERNEL, check=False)
    assert_one_line_error(proc, "cannot work in a host directory")
    assert not cli.db.exists() or cli.sql("SELECT count(*) FROM run") == [(0,)]


# -- runs in a guest ------------------------------------------------------------------------------

@needs_kernel
@needs_vm
def test_cmd_runs_a_host_program_in_the_guest_over_9p(cli):
    # `test` is the host's coreutils from the 9p root; it succeeds only under the guest's kernel.
    check = f'test "$(uname -r)" = {RELEASE}'
    cli("run", "cmd", "--runs", "2", "--kernel", KERNEL, "--", "sh", "-c", check, timeout=RUN_TIMEOUT)
    (status,), = cli.sql("SELECT status FROM run WHERE id = 1")
    assert status == "finished"
    facts = _facts(cli, 1)
    assert facts["kernel_release"] == RELEASE and "over 9p" in facts["guest_programs"]
    assert "9p" in facts["guest_modules"].split()
    assert cli.sql("SELECT count(*) FROM sample WHERE run_id = 1 AND metric = 'time.elapsed_time'") == [(2,)]


@needs_kernel
@needs_vm
@pytest.mark.skipif(shutil.which("fio") is None or shutil.which("mkfs.ext4") is None,
                    reason="needs fio and mkfs.ext4 (Debian fio, e2fsprogs)")
def test_fio_runs_in_the_guest_on_a_virtio_ext4_disk(cli):
    before = {n for n in os.listdir("/dev/shm") if n.startswith("perflab-vm-disk-")}
    cli("run", "fio", "--runs", "2", "--fs", "ext4", "--fs-size", "16M", "--size", "1M", "--runtime", "0.2",
        "--rw", "randwrite", "--kernel", KERNEL, timeout=RUN_TIMEOUT)
    rows = cli.sql("SELECT value, unit FROM sample WHERE run_id = 1 AND metric = 'fio.write_iops'")
    assert len(rows) == 2 and all(v > 0 for v, _ in rows)
    facts = _facts(cli, 1)
    assert facts["workdir_fs"] == "ext4" and "virtio disk" in facts["workdir_backing"]
    assert {"virtio_blk", "ext4", "9p"} <= set(facts["guest_modules"].split())
    assert {n for n in os.listdir("/dev/shm") if n.startswith("perflab-vm-disk-")} == before   # image removed


@needs_kernel
@needs_vm
def test_news_files_its_feed_written_on_the_host_in_the_guest(cli):
    """news writes its feed before the run: it travels into the guest's work directory."""
    cli("run", "news", "--runs", "1", "--articles", "20", "--kernel", KERNEL, timeout=RUN_TIMEOUT)
    (status,), = cli.sql("SELECT status FROM run WHERE id = 1")
    assert status == "finished"
    assert cli.sql("SELECT count(*) FROM sample WHERE run_id = 1 AND metric = 'news.file_s_per_article'") == [(1,)]
    assert _facts(cli, 1)["workdir_backing"].startswith("the guest's /tmp")


# -- the kernel as a dimension of the reports (runs stored through the store API; nothing boots) --

def _two_kernels(db: Path) -> None:
    from perflab.core.model import Sample
    from perflab.jobs import atomic
    from perflab.store import open_store

    store = open_store(str(db))
    for release, base, params in (("6.1.0-47-amd64", 0.3352, {"vm": "icount"}), ("6.1.0-50-amd64", 0.3372, {"vm": "icount"}),
                                  ("6.8.0-host", 0.2, {})):
        run = store.create_run(box="box", environment={"testbox": "box", "kernel_release": release}, benchmark="lmbench",
                               name="lmbench", params=params, job=atomic("lmbench", {}).to_dict())
        store.add_samples(run, 0, [Sample("syscall.null", base, "us", -1)])
        store.finish_run(run, "finished")


def test_the_pivot_table_takes_kernel_as_a_key(cli):
    _two_kernels(cli.db)
    out = cli("report", "table", "--rows", "benchmark", "--cols", "kernel", "syscall.null").stdout
    head, _, row = out.splitlines()[1:4]
    assert head.split()[-3:] == ["6.1.0-47-amd64", "6.1.0-50-amd64", "6.8.0-host"]
    assert row.split()[1:] == ["0.3352", "0.3372", "0.2000"]


def test_the_html_report_draws_one_series_across_the_guest_kernels(cli, tmp_path):
    """Issue 33: a guest's series is one line over its kernels in version order (it was a series
    per kernel, each a single point, so no history was drawn); the host's stays its own."""
    from perflab.analysis.series import BY_KERNEL
    from perflab.analysis.views.page import Filters, build_page
    from perflab.store import open_store

    _two_kernels(cli.db)
    view = build_page(open_store(str(cli.db)), Filters(benchmark="lmbench"))
    series = view.trends.history.series
    assert sorted(json.loads(s.params).get("vm", "host") for s in series) == ["host", "icount"]
    (guest,) = [s for s in series if json.loads(s.params).get("vm") == "icount"]
    assert guest.order == BY_KERNEL and [p.kernel for p in guest.points] == ["6.1.0-47-amd64", "6.1.0-50-amd64"]
    cli("report", "html", "--benchmark", "lmbench", "-o", tmp_path / "r.html")
    assert '6.1.0-50-amd64' in (tmp_path / "r.html").read_text()


# -- --kernel over a job file, on run and submit (nothing boots) ------------------------------------

def test_kernel_over_a_job_file_works_out_its_points_with_the_guests_vcpus(tmp_path):
    from perflab.jobs import guest, load_atomic

    if (os.cpu_count() or 1) < 2 or len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs 2 CPUs on the host, so that 50% and 100% differ there")
    image = tmp_path / "bzImage"
    image.write_bytes(b"x")
    job = tmp_path / "wis.yaml"
    job.write_text("benchmark: will-it-scale\ntest: getppid1\nnr_task: [1, 50%, 100%]\n")
    assert len(load_atomic(job)) == 2                      # the host's CPUs: 1, 1, 2 -> two points
    jobs = load_atomic(job, guest.file_overrides(job, [], {"kernel": str(image), "vm": {"mode": "icount"}}))
    assert len(jobs) == 1 and jobs[0].kernel == str(image)  # one vCPU: 1, 1, 1 -> one point
    job.write_text(f"benchmark: will-it-scale\ntest: getppid1\nnr_task: 100%\nkernel: {image}\n"
                   "vm: {memory: 256M, cpus: 2}\n")
    (moved,) = load_atomic(job, guest.file_overrides(job, [], {"vm": {"mode": "icount"}}))
    assert moved.vm["mode"] == "icount" and moved.vm["memory"] == 256 and moved.vm["cpus"] == 2   # the file's block kept


def test_submit_takes_kernel_and_vm_and_refuses_bad_ones_before_the_broker(cli, tmp_path):
    job = tmp_path / "j.yaml"
    job.write_text("benchmark: hackbench\n")
    proc = cli("submit", job, "--box", "b", "--vm", "icount", "--broker", "redis://127.0.0.1:1/0", check=False)
    assert_one_line_error(proc, "key 'vm' needs a kernel")
    proc = cli("submit", job, "--box", "b", "--kernel", tmp_path / "k", "--vm", "xen", check=False)
    assert proc.returncode != 0 and "xen" in proc.stderr
    proc = cli("submit", job.with_name("kb.yaml"), "--box", "b", "--kernel", "/k", check=False)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
