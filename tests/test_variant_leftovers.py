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

PER_OP = {"amd64": {"do_syscall_64": 100, "entry_SYSCALL_64": 40, "[user]": 49},
          "rt-amd64": {"do_syscall_64": 160, "entry_SYSCALL_64": 40, "[user]": 49},
          "mitigations=off": {"do_syscall_64": 60, "entry_SYSCALL_64": 20, "[user]": 49}}


def _profiled(store, release: str, cmdline: str, bump: int, tag: str = "v44") -> None:
    per_op = {k: v + (bump if k == "do_syscall_64" else 0)
              for k, v in PER_OP[cmdline or release.split("-", 2)[2]].items()}
    kernel = {"image": f"debian:{release}", "cmdline": cmdline} if cmdline else f"debian:{release}"
    params = {"test": "getppid1", "mode": "process", "nr_task": 1, "vm": "icount", **({"cmdline": cmdline} if cmdline else {})}
    run = store.create_run(box="lab1", environment={"testbox": "lab1", "kernel_release": release, "vm_mode": "icount",
                                                    "kernel_cmdline": f"console=ttyS0 {cmdline}".strip()},
                           benchmark="will-it-scale", name="will-it-scale", params=params, tag=tag,
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
    assert "6.1.0-47-amd64" not in off.split("\n")[0], off
    plain = next(b for h, b in sections.items() if "mitigations=off" not in h)
    row = next(l for l in off.splitlines() if l.endswith(" do_syscall_64"))
    assert row.split()[:3] == ["60.00", "61.00", "+1.00"], off
    row = next(l for l in plain.splitlines() if l.endswith(" do_syscall_64"))
    assert row.split()[:3] == ["100.00", "101.00", "+1.00"], plain


def test_report_profiles_columns_are_headed_by_whole_kernel_names(cli):
    """kernel=6.1.0-47-amd64 against kernel=6.1.0-47-rt-amd64: the head's column read
    `6.1.0-47-rt-amd` (cut at 15 characters)."""
    store = open_store(str(cli.db))
    for release in ("6.1.0-47-amd64", "6.1.0-47-rt-amd64"):
        _profiled(store, release, "", 0, "t")
    out = cli("report", "profile", "kernel=6.1.0-47-amd64", "kernel=6.1.0-47-rt-amd64").stdout
    head = next(l for l in out.splitlines() if l.rstrip().endswith("function"))
    assert head.split()[:2] == ["kernel=6.1.0-47-amd64", "kernel=6.1.0-47-rt-amd64"], head


def test_report_profile_of_two_tags_keeps_each_flavour_apart(cli):
    """A tag of amd64 and rt against another: a section per flavour (amd64 with amd64, rt with
    rt), never rt's do_syscall_64 averaged into amd64's."""
    store = open_store(str(cli.db))
    for release, bump, tag in (("6.1.0-47-amd64", 0, "t47"), ("6.1.0-47-rt-amd64", 0, "t47"),
                               ("6.1.0-56-amd64", 1, "t56"), ("6.1.0-56-rt-amd64", 2, "t56")):
        _profiled(store, release, "", bump, tag)
    out = cli("report", "profile", "t47", "t56").stdout
    sections = _sections(out)
    assert len(sections) == 2 and "2 runs" not in out, out
    rt = next(b for h, b in sections.items() if "variant=rt" in h)
    amd64 = next(b for h, b in sections.items() if "variant=amd64" in h)
    assert next(l for l in rt.splitlines() if l.endswith(" do_syscall_64")).split()[:3] == ["160.00", "162.00", "+2.00"]
    assert next(l for l in amd64.splitlines() if l.endswith(" do_syscall_64")).split()[:3] == ["100.00", "101.00", "+1.00"]


# -- one figure per run: trends take compare's estimator, exports name it ----------------------

def _plant_rates(path: str) -> None:
    """Two host runs of a rate that is not exact: 100 and 300 ops/s (harmonic mean 150, mean 200),
    then 200 and 200."""
    store = open_store(path)
    for tag, values in (("r1", (100.0, 300.0)), ("r2", (200.0, 200.0))):
        run = store.create_run(box="lab1", environment={"testbox": "lab1"}, benchmark="will-it-scale",
                               name="will-it-scale", params={"test": "getppid1", "mode": "process", "nr_task": 1},
                               tag=tag)
        for rep, value in enumerate(values):
            store.add_samples(run, rep, [Sample("will-it-scale.per_process_ops", value, "ops/s", HIGHER_IS_BETTER)])
        store.finish_run(run, "finished")


def test_a_rates_trend_point_is_the_harmonic_mean_compare_prints(tmp_path):
    from perflab.analysis.views.page import Filters, build_page
    from perflab.report import html_doc

    path = str(tmp_path / "perflab.db")
    _plant_rates(path)
    doc = html_doc.document(build_page(open_store(path), Filters()))
    trend = next(t for t in doc["trends"] if t["metric"] == "will-it-scale.per_process_ops")
    assert trend["y"] == [150.0, 200.0], trend
    assert trend["figure"] == "harmonic mean"


def test_compare_exports_name_the_estimator_and_the_page_reads_them(cli, tmp_path):
    import csv
    import io
    import json

    _plant_rates(str(cli.db))
    doc = json.loads(cli("compare", "r1", "r2", "--style", "json").stdout)
    rec = next(m for m in doc["metrics"] if m["metric"] == "will-it-scale.per_process_ops")
    assert rec["estimator"] == "hmean" and rec["base_stats"]["center"] == 150.0, rec
    rows = list(csv.DictReader(io.StringIO(cli("compare", "r1", "r2", "--style", "csv").stdout)))
    assert rows[0]["estimator"] == "hmean" and float(rows[0]["base_center"]) == 150.0, rows[0]
    page = tmp_path / "page.html"
    cli("report", "html", "r1", "r2", "-o", page)
    assert page.stat().st_size > 0


# -- fio: where its files were is said with its result ------------------------------------------

def test_perflab_runs_result_line_says_the_work_directorys_file_system(cli, tmp_path):
    from perflab.execution.workdir import filesystem_of

    from test_fio import TINY

    out = cli("run", "fio", "--rw", "read", *TINY, "--runs", "1").stdout
    line = next(l for l in out.splitlines() if l.startswith("run #"))
    fs = filesystem_of(str(tmp_path))[0]
    assert re.search(rf", workdir {re.escape(fs)} at \S+ \(ok\)$", line), (line, fs)


def test_a_guests_default_work_directory_is_said_as_the_guests_tmpfs(tmp_path):
    """A guest job without fs/dir reads and writes the guest's /tmp: the result line says so."""
    from perflab.execution.vm.disk import Disk, _make
    from perflab.runner.service import _workdir

    facts = _make(Disk(str(tmp_path / "work"), str(tmp_path), None), SimpleNamespace(fs=None, fs_size="1G"))
    assert _workdir(facts) == "tmpfs: the guest's /tmp (tmpfs in the guest's memory)"


# -- scaling curves and kernbench columns: a column per variant of a tag -----------------------

def _flavours(store, benchmark: str, params_list, metric: str, value_of) -> None:
    """Runs of one tag `mix` on Debian's amd64 and rt under icount, one per parameter set."""
    for release in ("6.1.0-47-amd64", "6.1.0-47-rt-amd64"):
        for params in params_list:
            run = store.create_run(box="lab1", environment={"testbox": "lab1", "kernel_release": release},
                                   benchmark=benchmark, name=benchmark, params={**params, "vm": "icount"}, tag="mix",
                                   job={"benchmark": benchmark, **params, "kernel": f"debian:{release}", "vm": dict(VM)})
            store.add_samples(run, 0, [Sample(metric, value_of(release, params), "", HIGHER_IS_BETTER, exact=True)])
            store.finish_run(run, "finished")


def test_scaling_curves_of_one_tag_are_a_curve_per_kernel(tmp_path):
    from perflab.benchmarks.will_it_scale import WORKLOAD
    from perflab.benchmarks.will_it_scale.view import scaling

    store = open_store(str(tmp_path / "perflab.db"))
    _flavours(store, "will-it-scale", [{"test": "getppid1", "mode": "process", "nr_task": n} for n in (1, 2)],
              WORKLOAD, lambda release, p: (3000.0 if "rt" in release else 1000.0) * p["nr_task"])
    view = scaling(store, (), (), None)
    assert len(view.curves) == 2 and sorted(view.variants) == ["mix 6.1.0-47 amd64", "mix 6.1.0-47 rt"], view.variants
    for label, curve in zip(view.variants, view.curves):
        per_task = 3000.0 if label.endswith("rt") else 1000.0
        assert [(p.tasks, p.summary.mean) for p in curve.points] == [(1, per_task), (2, 2 * per_task)], label


def test_kernbench_columns_of_one_tag_are_a_column_per_kernel(tmp_path):
    from perflab.benchmarks.kernbench.view import report

    store = open_store(str(tmp_path / "perflab.db"))
    _flavours(store, "kernbench", [{"load": "half", "jobs": 1}], "kernbench.elapsed_time",
              lambda release, p: 200.0 if "rt" in release else 100.0)
    view = report(store, (), "lab1")
    assert view.labels == ["mix 6.1.0-47 amd64", "mix 6.1.0-47 rt"], view.labels


# -- an exact metric whose samples scatter: one figure, the same in show, compare and the trend --

SCATTERED = (771.64, 790.0, 800.0, 810.0, 820.0)     # proc.exec under icount: ±3%, no shared figure


def _plant_scattered(path: str) -> None:
    store = open_store(path)
    for tag, shift in (("s1", 0.0), ("s2", 10.0)):
        run = store.create_run(box="lab1", environment={"testbox": "lab1", "kernel_release": "6.1.0-47-amd64"},
                               benchmark="lmbench", name="lmbench", params={"vm": "icount"}, tag=tag,
                               job={"benchmark": "lmbench", "kernel": "debian:6.1.0-47-amd64", "vm": dict(VM)})
        for rep, v in enumerate(SCATTERED):
            store.add_samples(run, rep, [Sample("proc.exec", v + shift, "us (icount)", -1, exact=True)])
        store.finish_run(run, "finished")


def test_scattered_exact_samples_are_one_figure_in_show_compare_and_the_trend(cli):
    import json

    from perflab.analysis.views.page import Filters, build_page
    from perflab.report import html_doc

    _plant_scattered(str(cli.db))
    mean = sum(SCATTERED) / len(SCATTERED)
    shown = next(l for l in cli("show", "1").stdout.splitlines() if l.strip().startswith("proc.exec"))
    assert shown.split()[4:6] == [f"{mean:.4g}", "mean"], shown
    doc = json.loads(cli("compare", "s1", "s2", "--style", "json").stdout)
    assert doc["metrics"][0]["base_stats"]["center"] == mean
    trend = next(t for t in html_doc.document(build_page(open_store(str(cli.db)), Filters()))["trends"]
                 if t["metric"] == "proc.exec")
    assert trend["y"][0] == mean and trend["figure"] == "arithmetic mean", trend


def test_log_prints_an_icount_runs_least_disturbed_sample_as_show_does(cli):
    """The catalog's unit (`us`) lacks the `(icount)` mark the samples carry: log took the mean of
    syscall.null (two ticked samples of ten: 0.3244) where show prints 0.323 (exact)."""
    store = open_store(str(cli.db))
    run = store.create_run(box="lab1", environment={"testbox": "lab1", "kernel_release": "6.1.0-47-rt-amd64"},
                           benchmark="lmbench", name="lmbench", params={"only": ["processes"], "vm": "icount"},
                           tag="v44", job={"benchmark": "lmbench", "only": ["processes"],
                                           "kernel": "debian:6.1.0-47-rt-amd64", "vm": dict(VM)})
    for rep, v in enumerate([0.323029] * 8 + [0.330093, 0.329977]):
        store.add_samples(run, rep, [Sample("syscall.null", v, "us (icount)", -1, exact=True)])
    store.finish_run(run, "finished")
    line = next(l for l in cli("log").stdout.splitlines() if l.split()[:1] == [str(run)])
    assert line.split()[3] == "0.323", line
    shown = next(l for l in cli("show", str(run)).stdout.splitlines() if l.strip().startswith("syscall.null"))
    assert shown.split()[4:6] == ["0.323", "exact"], shown


def test_compare_takes_a_ticked_exact_metric_as_exact_as_show_does():
    """syscall.null under icount, Debian 6.1.0-47: eight of ten samples 0.323029 and two ticked.
    show prints 0.323 (exact); compare called it not exact and printed the mean, 0.3238."""
    from perflab.stats.compare import compare_many
    from perflab.stats.descriptive import EXACT, summarize

    base = [0.323029] * 8 + [0.330093, 0.329977]
    head = [0.323029] * 9 + [0.330001]
    c = compare_many([(base, head, -1)], assume_exact=[True])[0]
    assert c.exact and c.base.center == 0.323029 == summarize(base, -1, exact=True).center
    assert c.base.estimator == EXACT and c.pct_change == 0.0 and c.verdict == "no change", c
    assert "3 disturbed samples set aside" in str(c.warnings[0]), c.warnings
    scattered = compare_many([(list(SCATTERED), [v + 10 for v in SCATTERED], -1)], assume_exact=[True])[0]
    assert not scattered.exact and scattered.base.estimator == "mean"


def test_the_mails_where_has_a_section_per_flavour(cli):
    store = open_store(str(cli.db))
    for release, bump, tag in (("6.1.0-47-amd64", 0, "t47"), ("6.1.0-47-rt-amd64", 0, "t47"),
                               ("6.1.0-56-amd64", 1, "t56"), ("6.1.0-56-rt-amd64", 2, "t56")):
        _profiled(store, release, "", bump, tag)
    out = cli("report", "regression", "--base", "t47", "--head", "t56").stdout
    where = out[out.index("where (instructions counted per function"):out.index("Details are as below")]
    heads = [l.strip() for l in where.splitlines() if l.strip().startswith("## ")]
    assert len(heads) == 2 and any("variant=rt" in h for h in heads) and any("variant=amd64" in h for h in heads), where
    assert "2 runs" not in where, where
