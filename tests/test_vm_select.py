"""Comparing kernels (issue 20): `kernel=RELEASE` operands, and `rerun N --kernel K`.

The selection tests store runs with chosen kernel releases through the store API and boot
nothing; the `vm`-marked test reruns a tiny lmbench run in a TCG guest (skipped with the reason
when qemu-system-x86_64 or the kernel of tools/fetch_kernel.py is absent).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from conftest import assert_one_line_error
from perflab.core.model import Sample
from perflab.execution.vm import kernel
from perflab.jobs import atomic
from perflab.store import open_store

OLD, NEW, HOST = "6.1.0-47-amd64", "6.1.0-50-amd64", "6.8.0-host"
KERNEL = os.environ.get("PERFLAB_TEST_KERNEL") or kernel.cached()
needs_vm = pytest.mark.skipif(
    shutil.which("qemu-system-x86_64") is None or not KERNEL or not Path(KERNEL).is_file(),
    reason="needs qemu-system-x86_64 (Debian qemu-system-x86) and a kernel: python tools/fetch_kernel.py")


def _store_runs(db: Path) -> None:
    """Two guest runs of lmbench's null call on two kernels (the second 0.6% slower), and a host run."""
    store = open_store(str(db))
    for release, base, guest in ((OLD, 0.3352, True), (NEW, 0.3372, True), (HOST, 0.2000, False)):
        facts = {"testbox": "box", "kernel_release": release}
        if guest:
            facts.update(vm_mode="tcg", host_kernel_release=HOST)
        run = store.create_run(box="box", environment=facts, benchmark="lmbench", name="lmbench",
                               params={"vm": "tcg"} if guest else {}, job=atomic("lmbench", {}).to_dict())
        for rep in range(6):
            store.add_samples(run, rep, [Sample("syscall.null", base * (1 + 0.0001 * (rep % 3)), "us", -1)])
        store.finish_run(run, "finished")


@pytest.fixture
def stored(cli):
    _store_runs(cli.db)
    return cli


def test_compare_selects_runs_by_kernel_release(stored):
    out = stored("compare", f"kernel={OLD}", f"kernel={NEW}").stdout
    # Both operands are named as typed, and the null call's change is between them.
    assert f"kernel={OLD}" in out and f"kernel={NEW}" in out
    line = next(l for l in out.splitlines() if "syscall.null" in l and "only in" not in l)
    assert "+0.6%" in line, out


def test_a_unique_prefix_selects_its_release_and_is_shown_as_typed(stored):
    doc = json.loads(stored("compare", "kernel=6.1.0-47", "kernel=6.1.0-50", "--style", "json").stdout)
    assert doc["operands"] == ["kernel=6.1.0-47", "kernel=6.1.0-50"]
    assert doc["runs"] == {"kernel=6.1.0-47": [1], "kernel=6.1.0-50": [2]}
    assert_one_line_error(stored("compare", "kernel=6.1", f"kernel={NEW}", check=False),
                          "'kernel=6.1'", "several kernel releases", OLD, NEW)


def test_a_host_run_matches_its_own_kernel_release(stored):
    doc = json.loads(stored("compare", f"kernel={HOST}", f"kernel={HOST},benchmark=lmbench", "--style", "json").stdout)
    assert doc["runs"] == {f"kernel={HOST}": [3], f"kernel={HOST},benchmark=lmbench": [3]}


def test_report_lmbench_takes_kernel_operands(stored):
    out = stored("report", "lmbench", f"kernel={OLD}", f"kernel={NEW}").stdout
    assert f"kernel={OLD}" in out and f"kernel={NEW}" in out and "0.34" in out


def test_an_unknown_release_or_key_is_one_line(stored):
    assert_one_line_error(stored("compare", "kernel=5.10.0", f"kernel={NEW}", check=False),
                          "'kernel=5.10.0'", "kernel release '5.10.0'", OLD, NEW, HOST)
    assert_one_line_error(stored("compare", "kernal=6.1.0-47-amd64", f"kernel={NEW}", check=False),
                          "unknown key 'kernal'", "valid keys: tag, commit", "kernel", "kernel_release")


def test_rerun_refuses_a_guest_it_cannot_boot_in_one_line(stored, tmp_path):
    missing = tmp_path / "no-such-vmlinuz"
    assert_one_line_error(stored("rerun", "1", "--kernel", missing, "--vm", "tcg", check=False),
                          f"kernel {missing}: no such file")
    assert_one_line_error(stored("rerun", "3", "--vm", "icount", check=False), "perflab rerun 3", "needs a kernel")
    store = open_store(str(stored.db))
    run = store.create_run(box="box", environment={"testbox": "box"}, benchmark="cmd", name="true",
                           params={"argv": ["true"]}, job=atomic("cmd", {"argv": ["true"]}).to_dict())
    store.finish_run(run, "finished")
    # cmd runs in a guest (the host's root over 9p): the missing kernel is what is refused
    assert_one_line_error(stored("rerun", str(run), "--kernel", missing, check=False), f"kernel {missing}: no such file")
    assert stored.sql("SELECT count(*) FROM run") == [(4,)]


@pytest.mark.vm
@needs_vm
def test_rerun_on_another_kernel_stores_the_guest_release(cli):
    tiny = {"PERFLAB_LMBENCH_TINY": "1"}
    cli("run", "lmbench", "--only", "processes", "--tag", "host", env=tiny)
    # a backstop (the boot's own limit, 60 s, fails a hung guest first): a TCG boot alone takes 16 s under load
    out = cli("rerun", "1", "--kernel", KERNEL, "--vm", "tcg", "--tag", "guest", env=tiny, timeout=600).stdout
    assert "run #2" in out
    (facts,), = cli.sql("SELECT e.facts FROM run r JOIN environment e ON e.id = r.environment_id WHERE r.id = 2")
    facts = json.loads(facts)
    release = Path(KERNEL).name.removeprefix("vmlinuz-")
    assert facts["kernel_release"] == facts["guest_kernel_release"] == release and facts["vm_mode"] == "tcg"
    (tag, params, job), = cli.sql("SELECT tag, params, job FROM run WHERE id = 2")
    assert tag == "guest" and json.loads(params)["vm"] == "tcg" and json.loads(job)["kernel"] == str(KERNEL)
    if release != os.uname().release:   # the host's own runs would match too
        doc = json.loads(cli("compare", f"kernel={release}", f"kernel={release}", "--style", "json").stdout)
        assert doc["runs"] == {f"kernel={release}": [2]}
