"""Issue 44's leftovers: the read layers decide guest/icount from the run's variant
(analysis.variant), and nothing an operand selects is pooled across variants. Stores are
planted as the runner stores guest runs; no guest boots."""

from __future__ import annotations

import re
from types import SimpleNamespace

from perflab.core.model import HIGHER_IS_BETTER, INFORMATIONAL, Sample
from perflab.store import open_store

VM = {"mode": "icount", "cpus": 1, "memory": 512, "qemu_args": []}
OPS = 1000


def _guest_run(**over):
    """A stored guest run whose job names its kernel but not its VM block (a run recorded before
    jobs kept theirs): only its parameters say the guest's mode and vCPUs."""
    fields = dict(id=1, box="lab1", benchmark="will-it-scale", tag="t", commit=None,
                  params={"test": "getppid1", "mode": "process", "nr_task": 1, "vm": "icount", "vm_cpus": 2},
                  job={"benchmark": "will-it-scale", "kernel": "debian:6.1.0-47-amd64"},
                  environment={"testbox": "lab1", "kernel_release": "6.1.0-47-amd64"})
    fields.update(over)
    return SimpleNamespace(**fields)


def test_the_mails_guest_is_the_runs_variant_not_its_jobs_vm_block():
    from perflab.analysis.regression import kernel_side

    side = kernel_side(_guest_run())
    assert side is not None and side.mode == "icount" and side.cpus == 2, side
    assert side.image == "debian:6.1.0-47-amd64"
    host = _guest_run(params={"test": "getppid1"}, job={"benchmark": "will-it-scale"})
    assert kernel_side(host) is None


def test_counted_runs_under_icount_are_found_by_their_variant():
    from perflab.analysis.change_kinds import _mode

    assert _mode(_guest_run()) == (False, True)
    valgrind = _guest_run(params={"test": "getppid1"}, job={"benchmark": "will-it-scale", "measure": "instructions"})
    assert _mode(valgrind) == (True, False)


# -- report profile kernel=A kernel=B: one section per variant of the testcase -----------------

PER_OP = {"plain": {"do_syscall_64": 100, "entry_SYSCALL_64": 40, "[user]": 49},
          "mitigations=off": {"do_syscall_64": 60, "entry_SYSCALL_64": 20, "[user]": 49}}


def _profiled(store, release: str, cmdline: str, bump: int) -> None:
    per_op = {k: v + (bump if k == "do_syscall_64" else 0) for k, v in PER_OP[cmdline or "plain"].items()}
    kernel = {"image": f"debian:{release}", "cmdline": cmdline} if cmdline else f"debian:{release}"
    params = {"test": "getppid1", "mode": "process", "nr_task": 1, "vm": "icount", **({"cmdline": cmdline} if cmdline else {})}
    run = store.create_run(box="lab1", environment={"testbox": "lab1", "kernel_release": release, "vm_mode": "icount",
                                                    "kernel_cmdline": f"console=ttyS0 {cmdline}".strip()},
                           benchmark="will-it-scale", name="will-it-scale", params=params, tag="v44",
                           job={"benchmark": "will-it-scale", "test": "getppid1", "mode": "process", "nr_task": 1,
                                "kernel": kernel, "vm": dict(VM)})
    total = sum(per_op.values()) * OPS
    for rep in range(2):
        samples = [Sample("will-it-scale.workload", OPS * 1e9 / total, "ops/s (icount)", HIGHER_IS_BETTER,
                          exact=True)]
        for name, n in per_op.items():
            metric = "insn-profile.user" if name == "[user]" else f"insn-profile.self.{name}"
            samples.append(Sample(metric, n * OPS, "instructions", INFORMATIONAL, exact=True))
        store.add_samples(run, rep, samples)
    store.set_run_monitors(run, {"insn-profile": {"options": {}, "interval": 1.0, "status": "ran", "unsupported": [],
                                                  "errors": [], "where": "in the VM guest", "window": "measured"}})
    store.finish_run(run, "finished")


def _plant_boot_options(cli):
    store = open_store(str(cli.db))
    for release, bump in (("6.1.0-47-amd64", 0), ("6.1.0-56-amd64", 1)):
        for cmdline in ("", "mitigations=off"):
            _profiled(store, release, cmdline, bump)
    return cli


def _sections(out: str) -> dict[str, str]:
    parts = re.split(r"^## ", out, flags=re.M)
    return {p.splitlines()[0]: p for p in parts[1:]}


def test_report_profile_of_two_kernels_keeps_each_kernels_boot_options_apart(cli):
    """kernel=6.1.0-47-amd64 selects the plain kernel and the same kernel booted with
    mitigations=off: two variants, two sections, each side one run, never one pooled profile."""
    out = _plant_boot_options(cli)("report", "profile", "kernel=6.1.0-47-amd64", "kernel=6.1.0-56-amd64").stdout
    sections = _sections(out)
    assert len(sections) == 2, out
    assert "2 runs" not in out and "4 repetitions" not in out, out
    off = next(b for h, b in sections.items() if "mitigations=off" in h)
    plain = next(b for h, b in sections.items() if "mitigations=off" not in h)
    row = next(l for l in off.splitlines() if l.endswith(" do_syscall_64"))
    assert row.split()[:3] == ["60.00", "61.00", "+1.00"], off
    row = next(l for l in plain.splitlines() if l.endswith(" do_syscall_64"))
    assert row.split()[:3] == ["100.00", "101.00", "+1.00"], plain
