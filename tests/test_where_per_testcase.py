"""Where, per testcase (issue 44, finding 4): `report profile` and the mail's "where" never pool
atomic jobs with different parameters, say once which window each section counted, pair
renamed functions, and say why a row's part of the change exceeds the whole.

The store is planted: two kernels, each running signal1 (counted over its measured part) and
page_fault1 (over the whole process, recorded the way runs before issue 44 recorded it),
two repetitions each, exact counts as insn-profile stores them under icount. No guest boots.
"""

from __future__ import annotations

import re

import pytest

from perflab.core.model import INFORMATIONAL, Sample

OPS = 1000          # operations per window: the window's counts are the per-operation figures × OPS
KALLSYMS = "the guest's /proc/kallsyms"

# Instructions per operation, as the kernels' code would give them.
SIGNAL1 = {
    "A": {"do_syscall_64": 100, "exit_to_user_mode_prepare": 31, "__send_signal_locked": 150, "[user]": 49},
    "B": {"do_syscall_64": 101, "exit_to_user_mode_prepare": 32, "__send_signal_locked": 150, "[user]": 49},
}
PAGE_FAULT1 = {
    "A": {"clear_page_erms": 4080.0, "cgroup_rstat_updated": 83.51, "handle_mm_fault": 62.63,
          "__free_one_page": 100.0, "[user]": 50.0, "[other]": 2249.81},
    # cgroup_rstat_updated renamed; handle_mm_fault +7.95 while __free_one_page -0.12: +7.83 in all
    "B": {"clear_page_erms": 4080.0, "__cgroup_rstat_updated": 83.51, "handle_mm_fault": 70.58,
          "__free_one_page": 99.88, "[user]": 50.0, "[other]": 2249.81},
}
RELEASE = {"A": "6.1.0-47-amd64", "B": "6.1.0-56-amd64"}


def _run(store, kernel: str, test: str, per_op: dict, record: dict) -> None:
    run = store.create_run(box="box", environment={"testbox": "box", "kernel_release": RELEASE[kernel]},
                           benchmark="will-it-scale", name="will-it-scale",
                           params={"test": test, "mode": "process", "nr_task": 1, "duration": 0.1}, tag="variants")
    total = sum(per_op.values()) * OPS
    for rep in range(2):
        samples = [Sample("will-it-scale.workload", OPS * 1e9 / total, "ops/s", 1, exact=True),
                   Sample("insn-profile.instructions", total, "instructions", INFORMATIONAL, exact=True)]
        for name, n in per_op.items():
            metric = "insn-profile.user" if name == "[user]" else f"insn-profile.self.{name}"
            samples.append(Sample(metric, n * OPS, "instructions", INFORMATIONAL, exact=True))
        store.add_samples(run, rep, samples)
    store.set_run_monitors(run, {"insn-profile": {"options": {}, "interval": 1.0, "status": "ran", "unsupported": [],
                                                  "errors": [], "where": "in the VM guest", **record}})
    store.finish_run(run, "finished")


@pytest.fixture
def planted(cli):
    from perflab.store import open_store

    store = open_store(str(cli.db))
    for kernel in ("A", "B"):
        # page_fault1 first: a view that followed the store's order would lead with it
        _run(store, kernel, "page_fault1", PAGE_FAULT1[kernel],
             {"notes": [f"counted over the whole process; functions named by {KALLSYMS}"]})   # as stored before
        _run(store, kernel, "signal1", SIGNAL1[kernel], {"window": "measured", "notes": [f"functions named by {KALLSYMS}"]})
    return cli


def _sections(out: str) -> dict[str, str]:
    """The output's sections by their heading line."""
    parts = re.split(r"^## ", out, flags=re.M)
    return {p.splitlines()[0]: p for p in parts[1:]}


def test_report_profile_has_one_section_per_testcase_with_its_window(planted):
    out = planted("report", "profile", f"kernel={RELEASE['A']}", f"kernel={RELEASE['B']}").stdout
    sections = _sections(out)
    assert len(sections) == 2, out
    heads = list(sections)
    # nothing pooled: each side of each section is its own run and its two repetitions
    assert "2 runs" not in out and "4 repetitions" not in out
    pf1 = next(h for h in heads if "page_fault1" in h)
    sig = next(h for h in heads if "signal1" in h)
    assert pf1.endswith("base 1 run, 2 repetitions, head 1 run, 2 repetitions; counted over the benchmark "
                        "process's life (its warm-up included)"), pf1
    assert sig.endswith("; counted over the benchmark's measured part"), sig
    # the page-fault functions stay in their section
    assert "clear_page_erms" not in sections[sig] and "clear_page_erms" in sections[pf1]
    assert "do_syscall_64" not in sections[pf1]
    # one header: no window in it, said once per section
    header = out.split("\n## ")[0]
    assert "measured part" not in header and "whole process" not in header
    assert f"functions named by {KALLSYMS}" in header
    # signal1's rows: +1 and +1 per operation, each half of the change
    row = next(l for l in sections[sig].splitlines() if l.endswith(" do_syscall_64"))
    assert row.split()[:4] == ["100.00", "101.00", "+1.00", "50.0%"], row


def test_a_renamed_function_is_one_row_and_a_part_over_the_whole_says_why(planted):
    out = planted("report", "profile", f"kernel={RELEASE['A']}", f"kernel={RELEASE['B']}").stdout
    pf1 = next(body for head, body in _sections(out).items() if "page_fault1" in head)
    assert "3416" not in out and not re.search(r"[+-]\d{3,}\.\d%", out), out
    renamed = next(l for l in pf1.splitlines() if "cgroup_rstat_updated" in l)
    assert renamed.split()[:3] == ["83.51", "83.51", "0"], renamed
    assert renamed.rstrip().endswith("__cgroup_rstat_updated  (renamed: cgroup_rstat_updated -> __cgroup_rstat_updated)")
    assert sum("cgroup_rstat_updated" in l for l in pf1.splitlines()) == 1
    hmm = next(l for l in pf1.splitlines() if " handle_mm_fault" in l)
    assert hmm.split()[:4] == ["62.63", "70.58", "+7.95", "101.5%"], hmm
    assert "(over 100%: the other rows moved -0.12 the other way)" in hmm
    assert "1 renamed function paired" in pf1


def test_stems_pair_clone_suffixes_and_leading_underscores():
    from perflab.analysis.views.profile import pair_renames, stem
    from perflab.stats.profile import compare_instructions

    assert {stem(s) for s in ("__cgroup_rstat_updated", "cgroup_rstat_updated.part.0", "cgroup_rstat_updated.isra.3",
                              "cgroup_rstat_updated.constprop.0.cold", "cgroup_rstat_updated.cold")} == \
        {"cgroup_rstat_updated"}
    base = [{"foo": 10.0, "bar.isra.0": 5.0, "[other]": 3.0, "kept": 1.0}]
    head = [{"__foo": 10.0, "bar": 4.0, "bar.cold": 2.0, "[unknown]": 3.0, "kept": 1.0}]
    rows, renames = pair_renames(compare_instructions(base, head).symbols)
    by = {r.symbol: r for r in rows}
    assert renames == 2 and by["__foo"].change == 0 and by["__foo"].renamed_from == ["foo"]
    assert by["bar"].renamed_from == ["bar.isra.0"] and sorted(by["bar"].renamed_to) == ["bar", "bar.cold"]
    assert by["bar"].change == pytest.approx(1.0)
    # [other] and [unknown] are not functions: never paired
    assert by["[other]"].change == -3.0 and by["[unknown]"].change == 3.0


def test_the_mails_where_leads_with_the_headlines_testcase(planted):
    out = planted("report", "regression", "--base", f"kernel={RELEASE['A']}", "--head", f"kernel={RELEASE['B']}").stdout
    assert "regression of will-it-scale.workload" in out
    where = out[out.index("where (instructions counted per function"):out.index("Details are as below")]
    heads = [l.strip() for l in where.splitlines() if l.strip().startswith("## ")]
    assert len(heads) == 2 and "signal1" in heads[0] and "page_fault1" in heads[1], where
    first = where[where.index(heads[0]):where.index(heads[1])]
    assert "clear_page_erms" not in first and "do_syscall_64" in first


def test_perf_profile_sections_per_testcase(cli):
    """Sampled shares alike: each testcase its own comparison, never one pooled over both."""
    import json

    from perflab.store import open_store

    store = open_store(str(cli.db))
    shares = {"signal1": {"__send_signal_locked": 40.0, "do_syscall_64": 30.0},
              "page_fault1": {"clear_page_erms": 60.0, "handle_mm_fault": 10.0}}
    for tag, extra in (("v1", 0.0), ("v2", 5.0)):
        for test, symbols in shares.items():
            run = store.create_run(box="box", environment={"testbox": "box"}, benchmark="will-it-scale",
                                   name="will-it-scale", params={"test": test, "mode": "process", "nr_task": 1}, tag=tag)
            for rep in range(3):
                store.add_samples(run, rep, [Sample(f"perf-profile.{kind}.cycles-pp.{sym}", value + extra + rep * 0.1,
                                                    "%", INFORMATIONAL)
                                             for sym, value in symbols.items() for kind in ("children", "self")])
                store.add_monitor_series(run, "perf-profile", rep, [(None, 1.0, {
                    json.dumps(["symbol", "[k]", "will-it-scale", sym]): value for sym, value in symbols.items()})])
            store.finish_run(run, "finished")
    out = cli("report", "profile", "v1", "v2").stdout
    sections = _sections(out)
    assert [h.split(":")[0] for h in sections] == ["will-it-scale test=signal1", "will-it-scale test=page_fault1"]
    for head, body in sections.items():
        assert "base 1 run, 3 repetitions, head 1 run, 3 repetitions; sampled over the benchmark process's life" in head
        mine = shares[head.split("test=")[1].split(":")[0]]
        listed = {l.split()[-1] for l in body.splitlines() if "[k]" in l}
        assert listed == set(mine), body
    side = cli("report", "profile", "v1").stdout
    assert len(_sections(side)) == 2 and "3 repetitions" in side and "6 repetitions" not in side
