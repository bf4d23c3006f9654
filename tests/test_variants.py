"""What was run is what is shown (issue 44): one variant identity through every view.

Stores are planted as the runner stores guest runs (tests/fixtures_variants.py): three Debian
flavours, a boot option and two recipes under one tag, Debian's amd64 history and a bisection's
self-built kernel. No guest boots."""

from __future__ import annotations

import json
import re

import pytest

from perflab.analysis import naming, series, variant
from perflab.analysis.views.page import Filters, build_page
from perflab.core.model import HIGHER_IS_BETTER, LOWER_IS_BETTER, Sample
from perflab.report import html_doc
from perflab.store import open_store

import fixtures_variants as fv
from fixtures_kernels import KERNELS, METRIC, environment
from test_html import _charts, _no_errors, _open, _settle, browser  # noqa: F401 (browser: the Chromium fixture)

LABELS = ["6.1.0-56 amd64", "6.1.0-56 cloud", "6.1.0-56 rt", "6.1.0-56 amd64 mitigations=off", "6.1.192 gcc-12",
          "6.1.192 gcc-12 +CC_OPTIMIZE_FOR_PERFORMANCE"]


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    path = tmp_path_factory.mktemp("variants") / "perflab.db"
    ids = fv.plant(str(path))
    return str(path), ids


@pytest.fixture
def db(cli):
    """The planted store where the `cli` fixture looks for it."""
    return fv.plant(str(cli.db))


def test_a_run_decodes_into_one_variant(planted):
    store = open_store(planted[0])
    runs = {r.id: r for r in store.find_runs()}
    ids = planted[1]
    rt = variant.of(runs[ids["lmbench 6.1.0-56-rt-amd64"]])
    assert (rt.target.kind, rt.target.mode, rt.target.cpus, rt.target.memory_mib) == ("guest", "icount", 1, 512)
    assert (rt.kernel.version, rt.kernel.flavour, rt.kernel.short_flavour, rt.kernel.origin) == \
        ("6.1.0-56", "rt-amd64", "rt", "debian")
    off = variant.of(runs[ids["lmbench 6.1.0-56-amd64 mitigations=off"]])
    assert off.kernel.cmdline == "mitigations=off" and off.line != variant.of(runs[ids["lmbench 6.1.0-56-amd64"]]).line
    fast = variant.of(runs[ids["lmbench 6.1.192 fast"]])
    assert (fast.kernel.origin, fast.kernel.compiler, fast.kernel.fragments) == \
        ("recipe", "gcc-12", ("+CC_OPTIMIZE_FOR_PERFORMANCE",))
    # the benchmark's parameters leave the target's out: those are the variant's target and kernel
    assert "kernel_build" not in fast.params and "vm" not in fast.params
    walk = variant.of(runs[ids["walk 0"]])
    assert walk.kernel.origin == "image" and walk.line != variant.of(runs[ids["wis 6.1.0-55-amd64"]]).line
    # the releases of one flavour are one line; the commit of a recipe's tree is history too
    assert variant.of(runs[ids["wis 6.1.0-47-amd64"]]).line == variant.of(runs[ids["wis 6.1.0-56-amd64"]]).line


def test_labels_are_the_shortest_part_that_tells_variants_apart(planted):
    store = open_store(planted[0])
    runs = sorted(store.find_runs(tag=fv.TAG, benchmark="lmbench"), key=lambda r: r.id)
    assert naming.variant_labels([variant.of(r) for r in runs]) == LABELS
    # among kernels that differ only in release, the release alone; one variant: its release
    history = [r for r in store.find_runs(benchmark="will-it-scale") if (r.tag or "").startswith("h-")]
    assert naming.variant_labels([variant.of(r) for r in history]) == [r.environment["kernel_release"] for r in history]
    # a series' name leaves the version out: the points are the versions
    assert naming.variant_labels([variant.of(r) for r in runs[:3]], anchor=False) == ["amd64", "cloud", "rt"]


def test_report_lmbench_prints_a_row_per_variant_never_pooled(cli, db):
    """Finding 1: one tag of six kernels was one row `6.1.192-e1` of pooled medians."""
    out = cli("report", "lmbench", fv.TAG).stdout
    rows = {}
    for line in out.splitlines():
        m = re.match(r"^(\S.*?\(e1\))\s+([\d.]+)$", line)
        if m:
            rows[m.group(1)] = float(m.group(2))
    assert rows == {f"{label} (e1)": null for label, (*_, null, _) in zip(LABELS, fv.VARIANTS)}, out


def test_log_labels_a_boot_option_and_two_recipes_apart(cli, db):
    """Finding 1: `log` printed mitigations=off as 6.1.0-56-amd64 and both recipes as 6.1.192."""
    out = cli("log", "--tag", fv.TAG, "lmbench").stdout
    kernels = [m.group(1).strip() for m in re.finditer(r"done\s+(.+?)\s{2,}e1\s", out)]
    assert kernels == LABELS, out


def test_flavours_boot_options_and_recipes_are_separate_series(planted):
    """Finding 2: detect called rt a +19% step after cloud on one line across flavours."""
    store = open_store(planted[0])
    history = series.build(store, benchmark="will-it-scale")
    naming.name_series(history.series)
    for s in history.series:
        lines = {variant.of(r).line for p in s.points for r in store.find_runs(ids=p.run_ids)}
        assert len(lines) == 1, s.name
    debian = [s for s in history.series if s.order == series.BY_KERNEL]
    assert len(debian) == 1 and [p.kernel for p in debian[0].points] == \
        [*(r for r, _ in fv.HISTORY), "6.1.0-56-amd64"]
    names = sorted(s.name.removeprefix("will-it-scale test=getppid1 mode=process nr_task=1 ") for s in history.series)
    assert names == sorted(["amd64", "cloud", "rt", "amd64 mitigations=off", "gcc-12",
                            "gcc-12 +CC_OPTIMIZE_FOR_PERFORMANCE", "6.1.192-walk (bisect-125)"])


def test_detect_steps_only_along_one_flavours_releases(cli, db):
    out = cli("detect", "--benchmark", "will-it-scale").stdout
    assert "6.1.0-56-rt-amd64 (run" not in out and "previous kernel 6.1.0-56-cloud-amd64" not in out, out
    assert re.search(r"REGRESSION\s+-0\.61%.*at kernel 6\.1\.0-50-amd64", out), out
    assert "6.1.192-walk" not in out.split("series without a change")[0], out


def test_a_bisections_runs_are_their_own_series(planted):
    """Finding 3: a self-built 6.1.192-walk was one point (a spike) of Debian's history."""
    store = open_store(planted[0])
    history = series.build(store, benchmark="will-it-scale")
    naming.name_series(history.series)
    walk = {planted[1]["walk 0"], planted[1]["walk 1"]}
    (own,) = [s for s in history.series if walk & {rid for p in s.points for rid in p.run_ids}]
    assert {rid for p in own.points for rid in p.run_ids} == walk and own.name.endswith("6.1.192-walk (bisect-125)")


def test_compare_matches_two_tags_variant_by_variant(cli, tmp_path):
    """A tag of three flavours against another of the same three: rt against rt, never pooled."""
    store = open_store(str(cli.db))
    for tag, scale in (("e1", 1.0), ("e2", 1.05)):
        for flavour, base in (("amd64", 0.100), ("cloud-amd64", 0.090), ("rt-amd64", 0.119)):
            release = f"6.1.0-56-{flavour}"
            run = store.create_run(box="lab1", environment=fv._env(release), benchmark="lmbench", name="lmbench",
                                   params={"vm": "icount"}, tag=tag,
                                   job={"benchmark": "lmbench", "kernel": f"debian:{release}", "vm": fv.VM})
            for rep in range(3):
                store.add_samples(run, rep, [Sample("syscall.null", base * scale, "µs (icount)", LOWER_IS_BETTER,
                                                    exact=True)])
            store.finish_run(run, "finished")
    out = cli("compare", "e1", "e2").stdout
    for flavour in ("amd64", "cloud", "rt"):
        assert re.search(rf"^variant={flavour}\s.*\+5\.0%", out, re.MULTILINE), out
    assert "only in" not in out
    assert "e1: its runs are of 3 variants (6.1.0-56 amd64, 6.1.0-56 cloud, 6.1.0-56 rt), compared variant by " \
        "variant, never pooled" in out


def test_the_plain_kernel_is_selected_apart_from_its_boot_options(cli, db):
    """`kernel=6.1.0-56-amd64` also selects the mitigations=off runs: the comparison says so, and
    `cmdline=` (no value) selects the kernel without boot options."""
    out = cli("compare", "tag=e1,kernel=6.1.0-56-amd64", "tag=e1,cmdline=mitigations=off", "--metric",
              "syscall.null").stdout
    assert "its runs are of 2 variants (6.1.0-56, 6.1.0-56 mitigations=off)" in out, out
    out = cli("compare", "tag=e1,kernel=6.1.0-56-amd64,cmdline=", "tag=e1,cmdline=mitigations=off", "--metric",
              "syscall.null").stdout
    assert "its runs are of" not in out and re.search(r"^\s+0\.1000\s+-40\.0%\s+0\.06000\s+syscall\.null", out,
                                                      re.MULTILINE), out


def _fio(store, tag: str, fs: str, vm: str | None, value: float) -> int:
    env = {"testbox": "lab1", "kernel_release": "6.1.0-56-amd64", "workdir_fs": fs,
           "workdir": "/tmp" if fs == "tmpfs" else "/var/tmp"}
    params = {"rw": "randread", "bs": "4k", **({"vm": vm} if vm else {})}
    job = {"benchmark": "fio", **params, **({"kernel": "debian:6.1.0-56-amd64", "vm": {**fv.VM, "mode": vm}} if vm else {})}
    job.pop("vm", None) if not vm else None
    run = store.create_run(box="lab1", environment=env, benchmark="fio", name="fio", params=params, tag=tag, job=job)
    for rep, jitter in enumerate((0.99, 1.0, 1.01)):
        store.add_samples(run, rep, [Sample("fio.read.clat_p99_ns", value * jitter, "ns", LOWER_IS_BETTER)])
    store.finish_run(run, "finished")
    return run


def test_a_comparison_of_sides_that_measured_different_things_says_so_first(cli):
    """Finding 6: fio on the host (ext4) against fio in a guest (tmpfs): -81% p99 called an
    improvement, and only `env --diff` said why."""
    store = open_store(str(cli.db))
    _fio(store, "host", "ext4", None, 100000.0)
    guest = _fio(store, "guest", "tmpfs", "tcg", 19000.0)
    # a run's own view says where its files were
    assert "  workdir   tmpfs at /tmp" in cli("show", str(guest)).stdout
    from perflab.report.registry import LAYOUTS

    for layout in LAYOUTS:
        if layout.data:
            continue
        out = cli("compare", "host", "guest", "--style", layout.name, check=False).stdout
        if layout.name == "lmbench":
            continue      # LMbench's figures only: nothing of fio to print
        first = out.splitlines()[:3]
        assert first[0] == "measured differently:", (layout.name, out)
        assert "ran on the host (base) against a tcg guest" in first[1]
        assert "work directory's file system ext4 (base) against tmpfs" in first[2]
    # the regression mail says it before its significance line (here -81% p99 reads as an improvement
    # of the head, so the mail is of the head as base: a +426% "regression")
    from perflab.analysis import regression
    from perflab.report.regression import render

    mail = render(regression.build(store, "guest", "host", mail={}))
    said = [line for line in mail.splitlines() if line.startswith("measured differently: ")]
    assert said == ["measured differently: host against guest: ran on a tcg guest (base) against the host",
                    "measured differently: host against guest: work directory's file system tmpfs (base) against ext4"]
    assert mail.index(said[-1]) < mail.index("significance:")
    # one side alike: nothing said
    _fio(store, "host2", "ext4", None, 101000.0)
    assert "measured differently" not in cli("compare", "host", "host2").stdout


def _sweep(store) -> None:
    """Eight Debian kernels under one tag (a sweep) and will-it-scale at one task count."""
    for release, upstream, figure in KERNELS:
        run = store.create_run(box="vm1", environment=environment(release, upstream), benchmark="will-it-scale",
                               name="will-it-scale", params={"test": "getppid1", "mode": "process", "nr_task": 1,
                                                             "vm": "icount"}, tag="sweep")
        for rep in range(3):
            store.add_samples(run, rep, [Sample(METRIC, figure, "ops/s (icount)", HIGHER_IS_BETTER, exact=True)])
        store.finish_run(run, "finished")


def test_html_distributions_draw_a_box_per_kernel_and_no_curve_of_one_task_count(tmp_path):
    """Finding 5: eight kernels of one tag were one box; one task count had a scaling chart."""
    store = open_store(str(tmp_path / "s.db"))
    _sweep(store)
    doc = html_doc.document(build_page(store, Filters()))
    (dist,) = [d for d in doc["distributions"] if "variants" in d]
    assert [v["label"] for v in dist["variants"]] == [k[0] for k in KERNELS]
    assert all(len(v["runs"]) == 1 for v in dist["variants"])
    assert doc["scaling"] == []


def test_html_trend_axis_title_clears_the_rotated_kernel_labels_in_chromium(browser, cli, tmp_path):
    """Finding 5: the rotated release labels of a kernel trend ran into the axis title. Drawn by
    Chromium: the title's box and every tick label's box do not meet; one box per kernel."""
    _sweep(open_store(str(cli.db)))
    page = tmp_path / "sweep.html"
    cli("report", "html", "-o", page)
    driver = browser
    _open(driver, page)
    _settle(driver)
    charts = {c["id"]: c for c in _charts(driver)}
    assert charts["trend-0"]["drawn"] >= 1
    boxes = driver.execute_script("""
        const plot = document.getElementById('trend-0');
        const r = e => { const b = e.getBoundingClientRect(); return [b.left, b.top, b.right, b.bottom]; };
        return { title: r(plot.querySelector('.g-xtitle text')),
                 ticks: Array.from(plot.querySelectorAll('.xtick text')).map(r),
                 boxes: document.querySelectorAll('#distribution-0 .box').length };""")
    assert len(boxes["ticks"]) == len(KERNELS)
    t = boxes["title"]
    overlapping = [b for b in boxes["ticks"] if b[0] < t[2] and t[0] < b[2] and b[1] < t[3] and t[1] < b[3]]
    assert not overlapping, (t, overlapping)
    assert boxes["boxes"] == len(KERNELS)
    _no_errors(driver)


def test_runs_of_other_commits_on_a_debian_kernel_are_a_series_of_their_own(tmp_path):
    """Finding 3: a patch series' runs (other commits) on Debian's 6.1.0-56 were pooled into that
    kernel's point of the history."""
    path = str(tmp_path / "s.db")
    fv.plant(path)
    store = open_store(path)
    wis = {"test": "getppid1", "mode": "process", "nr_task": 1}
    mine = set()
    for commit, figure in (("a" * 40, 2500000.0), ("b" * 40, 2400000.0)):
        mine.add(fv._run(store, "will-it-scale", "debian:6.1.0-56-amd64", dict(wis), "6.1.0-56-amd64",
                         fv._wis(figure), tag="series-7", commit=commit))
    history = series.build(store, benchmark="will-it-scale")
    naming.name_series(history.series)
    debian = [s for s in history.series if s.order == series.BY_KERNEL]
    pooled = [s for s in debian if mine & {rid for p in s.points for rid in p.run_ids}]
    assert len(pooled) == 2 and all(len(s.points) == 1 for s in pooled)
    (sweep,) = [s for s in debian if s not in pooled]
    assert [p.kernel for p in sweep.points] == [*(r for r, _ in fv.HISTORY), "6.1.0-56-amd64"]
    assert sorted(s.name.rsplit(" ", 1)[-1] for s in pooled) == ["commit=aaaaaaaaaaaa", "commit=bbbbbbbbbbbb"]


def test_html_of_two_flavours_draws_their_lines_only(planted):
    """The page of `kernel=A kernel=B` draws the trends of the lines compared, not every flavour's."""
    store = open_store(planted[0])
    page = build_page(store, Filters(operands=("kernel=6.1.0-56-cloud", "kernel=6.1.0-56-rt"),
                                     benchmark="will-it-scale"))
    names = sorted(t.series.name.rsplit(" ", 1)[-1] for t in page.trends.results)
    assert names == ["cloud", "rt"]
    doc = html_doc.document(page)
    assert doc["comparison"]["measured_differently"] == []


def test_report_table_rows_by_variant(cli, db):
    out = cli("report", "table", METRIC, "--rows", "variant", "--cols", "tag", "--tag", fv.TAG).stdout
    rows = {line.rsplit(None, 1)[0].strip(): float(line.rsplit(None, 1)[1])
            for line in out.splitlines()[3:] if line.strip()}
    assert rows == {label: figure for label, (*_, figure) in zip(LABELS, fv.VARIANTS)}, out


def test_guest_memory_and_mode_are_said_of_two_sides():
    from types import SimpleNamespace

    def run(**params):
        return SimpleNamespace(id=1, box="b", benchmark="fio", tag="t", commit=None, job=None,
                               params={"rw": "read", **params}, environment='{"workdir_fs": "ext4"}')

    base, head = variant.of(run(vm="tcg")), variant.of(run(vm="icount", vm_memory_mib=1024))
    assert base.workdir_fs == "ext4" and base.target.memory_mib == 512     # QEMU's default, not stored
    assert variant.measured_differently(base, head) == ["VM mode tcg (base) against icount",
                                                       "guest memory 512 MiB (base) against 1024 MiB"]
    assert variant.measured_differently(base, base) == []


def test_report_table_never_averages_two_variants_into_a_cell(cli, db):
    """`--rows tag`: one tag holds every variant of the worked example; a cell of the tag alone
    averaged their figures into one (pooling kernels). The columns are split by variant, said."""
    done = cli("report", "table", METRIC, "--rows", "tag", "--cols", "box", "--tag", fv.TAG)
    assert "split by variant" in done.stderr, done.stderr
    figures = sorted(float(x) for line in done.stdout.splitlines()[3:] for x in line.split()[1:] if line.strip())
    assert figures == sorted(figure for *_, figure in fv.VARIANTS), done.stdout


def test_compare_labels_the_variants_across_both_operands(cli, db):
    """Review 1: one kernel against a tag of six labelled the tag's groups only (`variant=amd64`
    against a bare group): the lone kernel's group matched none, and nothing said which variant of
    the tag it was. The labels are made across both operands: the lone kernel is `variant=amd64`
    on both sides (its release is what is compared), the tag's others are one-sided, named alike."""
    out = cli("compare", "h-6.1.0-55-amd64", fv.TAG).stdout
    assert re.search(r"^test=getppid1 mode=process nr_task=1 variant=amd64 vm=icount\s+3028048\s+0\.0%\s+3028048\s",
                     out, re.MULTILINE), out
    only = [line.strip() for line in out.splitlines() if line.strip().startswith("only in")]
    assert all(f"only in {fv.TAG}:" in line and "variant=" in line for line in only), out
    assert not any("variant=amd64," in line and "will-it-scale" in line for line in only), out
    # the other way round, and in benchstat's layout: the same group, labelled the same
    out = cli("compare", fv.TAG, "h-6.1.0-55-amd64", "--style", "benchstat", "--metric", METRIC).stdout
    assert re.search(r"^will-it-scale variant=amd64: will-it-scale\.per_process_ops\s+3028048 .*~", out, re.MULTILINE), out
    # each side of one variant only: operand against operand, no label (unchanged)
    out = cli("compare", "h-6.1.0-53-amd64", "h-6.1.0-55-amd64").stdout
    assert "variant=" not in out, out


def _perf_profiled(store, tag: str, cmdline: str, extra: float) -> None:
    """A perf-profile run of getppid1 on Debian's 6.1.0-56-amd64 in a guest, booted with `cmdline`."""
    import json

    from perflab.core.model import INFORMATIONAL

    shares = {"do_syscall_64": 30.0 + extra, "entry_SYSCALL_64": 20.0}
    params = {"test": "getppid1", "mode": "process", "nr_task": 1, **({"cmdline": cmdline} if cmdline else {})}
    kernel = {"image": "debian:6.1.0-56-amd64", "cmdline": cmdline} if cmdline else "debian:6.1.0-56-amd64"
    run = fv._run(store, "will-it-scale", kernel, params, "6.1.0-56-amd64", [], tag=tag)
    for rep in range(3):
        store.add_samples(run, rep, [Sample(f"perf-profile.{kind}.cycles-pp.{sym}", value + rep * 0.1, "%",
                                            INFORMATIONAL) for sym, value in shares.items()
                                     for kind in ("children", "self")])
        store.add_monitor_series(run, "perf-profile", rep, [(None, 1.0, {
            json.dumps(["symbol", "[k]", "will-it-scale", sym]): value for sym, value in shares.items()})])


def test_report_profile_heads_columns_with_what_tells_two_variants_apart(cli):
    """Review 2: `report profile` cut its column headings at 18 (perf-profile) and 24 (insn-profile)
    characters, or from the word where they differ: `tag=p1,kernel=6.1.0-56-amd64,cmdline=` against
    `...,cmdline=mitigations=off` was headed by nothing against `mitigations=off`. The headings are
    the whole operands up to 40 characters, each column as wide as its own; longer, the common part
    is said as "…" (the header names both whole)."""
    from test_variant_leftovers import _profiled

    store = open_store(str(cli.db))
    base, head = "tag=p1,kernel=6.1.0-56-amd64,cmdline=", "tag=p1,kernel=6.1.0-56-amd64,cmdline=mitigations=off"
    _perf_profiled(store, "p1", "", 0.0)
    _perf_profiled(store, "p1", "mitigations=off", 5.0)
    out = cli("report", "profile", base, head).stdout
    heading = next(l for l in out.splitlines() if l.rstrip().endswith("change"))
    assert heading.split() == ["…cmdline=", "…cmdline=mitigations=off", "change"], out
    assert f"base {base}, head {head}" in out
    row = next(l for l in out.splitlines() if l.endswith(" do_syscall_64"))
    assert row.split()[:4] == ["30.10%", "30.10%", "35.10%", "35.10%"], out
    # insn-profile's table: the base column was headed "" (the text after the last "=" before they differ)
    for release, cmdline, bump in (("6.1.0-47-amd64", "", 0), ("6.1.0-47-amd64", "mitigations=off", 0)):
        _profiled(store, release, cmdline, bump, "i1")
    base, head = "kernel=6.1.0-47-amd64,cmdline=", "kernel=6.1.0-47-amd64,cmdline=mitigations=off"
    out = cli("report", "profile", base, head).stdout
    heading = next(l for l in out.splitlines() if l.rstrip().endswith("function"))
    assert heading.split()[:2] == ["…cmdline=", "…cmdline=mitigations=off"], out


def test_a_profile_columns_heading_is_shortened_only_to_what_tells_them_apart():
    from perflab.report.profile import _columns

    assert _columns("kernel=6.1.0-56-amd64", "kernel=6.1.0-56-rt-amd64", 40) == \
        ("kernel=6.1.0-56-amd64", "kernel=6.1.0-56-rt-amd64")
    long = "tag=a-long-series-name,box=lab1,kernel=6.1.0-56-amd64,cmdline="
    assert _columns(long, long + "mitigations=off", 40) == ("…cmdline=", "…cmdline=mitigations=off")
    sha = "tag=bisect-125,commit="
    a, b = _columns(sha + "1" * 40, sha + "2" * 40, 24)
    assert a != b and a.startswith("…111") and len(a) <= 24
    assert _columns("x" * 50 + "a", "x" * 50 + "b", 18) == ("base", "head")   # the header names them whole


def test_report_table_leaves_out_a_row_of_no_sample_and_says_so(cli, db):
    """Review 3: `report table` printed a row of dashes for a tag that has no sample of the metric
    (e2 holds lmbench only; the history's tags no syscall.null); the other views leave out what
    they have no figure for. Left out, and a note on stderr names it."""
    fv.plant_head(str(cli.db))
    done = cli("report", "table", METRIC, "syscall.null", "--rows", "tag", "--cols", "variant")
    tables = done.stdout.split("\n\n")
    assert len(tables) == 2, done.stdout
    for table in tables:
        body = [line for line in table.splitlines()[3:] if line.strip()]
        assert body and all(re.search(r"\d", line.split(None, 1)[1]) for line in body), table
    wis_rows = [line.split()[0] for line in tables[0].splitlines()[3:] if line.strip()]
    assert "e2" not in wis_rows and "e1" in wis_rows, tables[0]
    null_rows = [line.split()[0] for line in tables[1].splitlines()[3:] if line.strip()]
    assert null_rows == ["e1", "e2"], tables[1]
    assert "6.1.0-47 amd64" not in tables[1].splitlines()[1], tables[1]
    assert f"note: {METRIC}: left out, no sample of it: tag e2" in done.stderr, done.stderr
    assert "note: syscall.null: left out, no sample of it: tag h-6.1.0-47-amd64" in done.stderr, done.stderr


def test_log_prints_a_kernel_label_whole(cli, db):
    """Review 4: `log` cut a kernel label at 44 characters (`6.1.192 gcc-12 +CC_OPTIMIZE_FOR_PERFOR…(+22)`),
    the only view that did, and the recipe's two builds (e1's and e2's) read alike. Whole now."""
    fv.plant_head(str(cli.db))
    out = cli("log").stdout
    assert "…(+" not in out, out
    kernels = {m.group(2).strip(): m.group(1) for m in re.finditer(r"^\s*(\d+)\s.*?done\s+(.+?)\s{2,}e[12]\s", out, re.M)}
    fast = [k for k in kernels if k.startswith("6.1.192 gcc-12 +CC_OPTIMIZE_FOR_PERFORMANCE ref=")]
    assert len(fast) == 2, out      # e1's build and e2's, told apart by their ref


def test_mmtests_heads_each_section_with_its_own_kernels(cli, db):
    """Review 5 (mmtests): a section's kernel line was the operand's, `mixed` for a tag of six
    kernels, in every section: the rt section did not say it measured 6.1.0-56-rt-amd64. Each
    section now heads its columns with the kernel its own runs measured."""
    fv.plant_head(str(cli.db))
    out = cli("compare", fv.TAG, "e2", "--style", "mmtests").stdout
    assert "mixed" not in out, out
    sections = {block.splitlines()[0]: block.splitlines()[1].split() for block in out.split("\n\n")
                if block.startswith("lmbench variant=")}
    assert sections["lmbench variant=rt"] == ["6.1.0-56-rt-amd64", "6.1.0-56-rt-amd64"], out
    assert sections["lmbench variant=cloud"] == ["6.1.0-56-cloud-amd64", "6.1.0-56-cloud-amd64"], out
    assert sections["lmbench variant=gcc-12"] == ["6.1.192", "6.1.192"], out
    out = cli("compare", "h-6.1.0-55-amd64", fv.TAG, "--style", "mmtests", "--metric", METRIC).stdout
    assert out.splitlines()[1].split() == ["6.1.0-55-amd64", "6.1.0-56-amd64"], out


def test_report_profile_pairs_one_kernel_with_its_variant_of_a_tag(cli):
    """Review 5 (the mail's "where", report profile): one kernel against a tag of two flavours keyed
    the lone kernel's testcase bare and the tag's by `variant=`, so none was compared ("only in"
    both sides). Keyed as compare keys them now: amd64 with amd64, rt only in the head."""
    from test_variant_leftovers import _profiled

    store = open_store(str(cli.db))
    _profiled(store, "6.1.0-47-amd64", "", 0, "t47")
    for release, bump in (("6.1.0-56-amd64", 1), ("6.1.0-56-rt-amd64", 2)):
        _profiled(store, release, "", bump, "t56")
    out = cli("report", "profile", "t47", "t56").stdout
    sections = re.split(r"^## ", out, flags=re.M)[1:]
    assert len(sections) == 1 and "variant=amd64" in sections[0].splitlines()[0], out
    row = next(l for l in sections[0].splitlines() if l.endswith(" do_syscall_64"))
    assert row.split()[:3] == ["100.00", "101.00", "+1.00"], out
    assert re.search(r"only in the head: .*variant=rt", out), out


def test_scaling_and_kernbench_label_a_lone_kernel_beside_a_tag_of_several(cli):
    """Review 5 (report scaling/kernbench and their page sections, the compare defect again): a tag
    of one kernel beside a tag of two flavours kept its bare label (`one`) while the other's were
    `two 6.1.0-56 amd64` and `two 6.1.0-56 rt`: which kernel `one` was went unsaid. Labelled
    across every operand now; the same for kernbench's columns. And `report scaling` of runs with no
    workload figure printed nothing at all and succeeded: it says so and fails."""
    from perflab.benchmarks.kernbench.view import report
    from perflab.benchmarks.will_it_scale import WORKLOAD
    from perflab.benchmarks.will_it_scale.view import scaling

    store = open_store(str(cli.db))
    for tag, release in (("one", "6.1.0-55-amd64"), ("two", "6.1.0-56-amd64"), ("two", "6.1.0-56-rt-amd64")):
        for n in (1, 2):
            fv._run(store, "will-it-scale", f"debian:{release}", {"test": "getppid1", "mode": "process", "nr_task": n},
                    release, [Sample(WORKLOAD, 1000.0 * n, "ops/s (icount)", HIGHER_IS_BETTER, exact=True)], tag=tag)
        fv._run(store, "kernbench", f"debian:{release}", {"load": "half", "jobs": 1}, release,
                [Sample("kernbench.elapsed_time", 100.0, "s (icount)", LOWER_IS_BETTER, exact=True)], tag=tag)
    view = scaling(store, ("one", "two"), (), None)
    assert sorted(set(view.variants)) == ["one 6.1.0-55 amd64", "two 6.1.0-56 amd64", "two 6.1.0-56 rt"], view.variants
    assert report(store, ("one", "two"), None).labels == ["one 6.1.0-55 amd64", "two 6.1.0-56 amd64", "two 6.1.0-56 rt"]
    # every operand of one variant: each keeps its label
    assert sorted(set(scaling(store, ("one", "tag=two,kernel=6.1.0-56-rt-amd64"), (), None).variants)) == \
        ["one", "tag=two,kernel=6.1.0-56-rt-amd64"]
    fv.plant(str(cli.db))
    done = cli("report", "scaling", "h-6.1.0-55-amd64", fv.TAG, check=False)
    assert done.returncode != 0 and "will-it-scale.workload" in done.stderr and not done.stdout, done


def test_detect_says_which_build_of_a_recipe_a_step_is_at(cli, db):
    """A step along a recipe's series names its point by tag *and* build: the commit the recipe's
    ref resolved to and the `kernel_build` key, so that a person knows which kernel to build
    again (the tag alone does not: one tag may hold several builds of the recipe)."""
    fv.plant_head(str(cli.db), "e2", slower="6.1.192 fast", by=1.2)
    out = cli("detect", "--benchmark", "lmbench", "--min-points", "2").stdout
    head = f"ref {'d00d' * 3}, build {'0f1e2d3c4b5a6978'[::-1][:12]}"
    before = f"ref {'c0ffee' * 2}, build 0f1e2d3c4b5a"
    assert re.search(rf"REGRESSION\s+\+20\.00%.*at tag e2, {head}, run #", out), out
    assert re.search(rf"previous tag e1, {before}, run #", out), out
    assert "ref " not in out.split("syscall.null")[0], out   # a Debian kernel's point has no build to say
    points = [p for s in json.loads(cli("detect", "--benchmark", "lmbench", "--min-points", "2", "--style", "json").stdout)
              ["series"] for c in s["change_points"] for p in (c["at"], c["previous"])]
    assert {p.get("build") for p in points} == {head, before}, points


def test_report_tables_left_out_note_is_one_line_whatever_the_tag(cli, db):
    """Review of the left-out note: it printed the tags and variants it names as stored, so a tag
    imported with a newline or a terminal escape broke the note into two lines and coloured the
    terminal; names are shown as every view shows them (core.text.printable)."""
    tag = "e2\n\x1b[31mred ünï"
    fv.plant_head(str(cli.db), tag)
    done = cli("report", "table", METRIC, "--rows", "tag", "--cols", "variant")
    notes = [line for line in done.stderr.splitlines() if line.startswith("note: ")]
    assert any(n.startswith(f"note: {METRIC}: left out, no sample of it: tag e2\\n\\x1b[31mred ünï;") for n in notes), \
        done.stderr
    assert "\x1b" not in done.stderr and "\x1b" not in done.stdout, done.stderr


def test_mmtests_does_not_head_a_section_with_the_kernel_of_another_benchmarks_run(cli, db):
    """Review of the per-section kernels: one run of will-it-scale against one of lmbench (one
    testcase a side, nothing matched) headed will-it-scale's head column with the lmbench run's
    kernel, a column without a figure of that section named by a kernel that measured none."""
    base, head = db["wis 6.1.0-47-amd64"], db["lmbench 6.1.0-56-amd64"]
    out = cli("compare", str(base), str(head), "--style", "mmtests").stdout
    section = out.split("\n\n")[0].splitlines()
    assert section[0].startswith("will-it-scale "), out
    assert section[1].split() == ["6.1.0-47-amd64", "-"], out


def test_report_table_keeps_a_recipe_s_builds_apart_and_says_they_are_one_recipe(cli, db):
    """Issue 46's leftover: `--cols variant` put e1's and e2's builds of one recipe (the same keys at
    two commits) in two columns while compare matches them. Right (a different commit is a different
    build: never pooled, as two releases of one Debian flavour are not), but the headings differed by
    a bare `ref=`: the note says they are one recipe's builds, the ref the commit each was built at."""
    fv.plant_head(str(cli.db))
    done = cli("report", "table", "syscall.null", "--rows", "tag", "--cols", "variant", "--tag", fv.TAG,
               "--tag", "e2")
    header = done.stdout.splitlines()[1]
    for commit in ("c0ffee" * 2, "d00d" * 3):
        assert f"6.1.192 gcc-12 ref={commit}" in header and \
            f"6.1.192 gcc-12 +CC_OPTIMIZE_FOR_PERFORMANCE ref={commit}" in header, header
    e1, e2 = (line.split() for line in done.stdout.splitlines()[3:5])
    assert e1[0] == "e1" and e2[0] == "e2"
    # A column per build: e1's figure under e1's build only, e2's under e2's (the fast one 1.2x slower).
    assert e1[-4:] == ["0.08000", "0.07000", "-", "-"] and e2[-4:] == ["-", "-", "0.08000", "0.08400"], done.stdout
    note = [line for line in done.stderr.splitlines() if "one recipe built at other commits" in line]
    assert len(note) == 1 and "ref=: the commit built" in note[0], done.stderr
    assert f"6.1.192 gcc-12 ref={'c0ffee' * 2} | 6.1.192 gcc-12 ref={'d00d' * 3}" in note[0], note
    # Two runs of one build (e1's build measured again under e3) are one column; nothing said of builds.
    again = fv._run(open_store(str(cli.db)), "lmbench", fv.RECIPE, {"kernel_build": "a1b2c3d4e5f60718"}, "6.1.192",
                    [Sample("syscall.null", 0.09, "µs (icount)", LOWER_IS_BETTER, exact=True)], tag="e3",
                    env_extra={"kernel_recipe_commit": "c0ffee" * 6 + "abcd"})
    one = cli("report", "table", "syscall.null", "--rows", "tag", "--cols", "variant", "--tag", fv.TAG,
              "--tag", "e3")
    assert "ref=" not in one.stdout and "one recipe" not in one.stderr, one.stdout + one.stderr
    e3 = next(line.split() for line in one.stdout.splitlines() if line.startswith("e3"))
    assert e3[-2:] == ["0.09000", "-"] and again, one.stdout      # under e1's `6.1.192 gcc-12`
