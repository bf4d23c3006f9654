"""Every view names a variant by its label (analysis.naming.variant_labels), never by a build
key's hash; what compare decodes of a run it decodes once. The worked example's store
(tests/fixtures_variants.py, docs/views.md "Variants"); no guest boots."""

from __future__ import annotations

import collections
import json
import re

import pytest

import fixtures_variants as fv

HASHES = ("a1b2c3d4e5f60718", "0f1e2d3c4b5a6978", "81706f5e4d3c2b1a", "8796a5b4c3d2e1f0")
FAST = "gcc-12 +CC_OPTIMIZE_FOR_PERFORMANCE"


@pytest.fixture
def two_tags(cli):
    """e1 (the worked example) and e2: its six variants again, the recipes built at another
    commit (another build key), the recipe with CONFIG_CC_OPTIMIZE_FOR_PERFORMANCE 20% slower."""
    fv.plant(str(cli.db))
    fv.plant_head(str(cli.db), "e2", slower="6.1.192 fast")
    return cli


@pytest.mark.parametrize("style", ["lkp", "benchstat", "mmtests", "lmbench", "kernbench", "json", "csv"])
def test_compare_names_the_recipes_by_their_variant_label_in_every_style(two_tags, style):
    """Before: the recipes' groups were keyed by `kernel_build=0f1e2d3c4b5a6978`, and the same
    recipe built at another commit (another key) was 'only in' each side, never compared."""
    out = two_tags("compare", "e1", "e2", "--benchmark", "lmbench", "--style", style).stdout
    for key in HASHES:
        assert key not in out, (style, out)
    assert "kernel_build" not in out and "only in" not in out, (style, out)
    if style == "json":
        doc = json.loads(out)
        assert not doc["only_in"], doc["only_in"]
        variants = sorted(r["params"]["variant"] for r in doc["metrics"])
        assert variants == sorted(["amd64", "cloud", "rt", "amd64 mitigations=off", "gcc-12", FAST]), variants
        fast = next(r for r in doc["metrics"] if r["params"]["variant"] == FAST)
        assert fast["verdict"] == "regression", fast
    elif style != "csv":
        assert FAST in out, (style, out)
    if style == "lkp":
        assert re.search(rf'^variant="{re.escape(FAST)}"\s+0\.07000\s+\+20\.0%\s+0\.08400\s+syscall\.null', out,
                         re.MULTILINE), out


def test_the_mails_job_is_the_headline_variants(two_tags):
    """The regression is of `mitigations=off` alone: the mail's job and kernel were the last run's
    of the tag (a recipe), since the headline's `variant` matched no run's parameters."""
    fv.plant_head(str(two_tags.db), "e3", slower="6.1.0-56-amd64 mitigations=off")
    out = two_tags("report", "regression", "--base", "e1", "--head", "e3", "-b", "lmbench").stdout
    assert "variant: amd64 mitigations=off" in out, out
    reproduce = out[out.index("To reproduce:"):out.index("perflab compare base head")]
    assert "tree:" not in reproduce and "CC_OPTIMIZE" not in reproduce, reproduce
    # --kernel replaces the image and keeps the job's boot options (before: the job file lost them).
    assert "  cmdline: mitigations=off\n" in reproduce and reproduce.count("--kernel debian:6.1.0-56-amd64 ") == 2, \
        reproduce
    out = two_tags("report", "regression", "--base", "tag=e1,kernel=6.1.0-56-amd64,cmdline=", "--head",
                   "tag=e3,cmdline=mitigations=off", "-b", "lmbench").stdout
    reproduce = out[out.index("To reproduce:"):out.index("perflab compare base head")]
    base, head = reproduce.split("cat > job-head.yaml")
    assert "cat > job-base.yaml" in base and "mitigations=off" not in base.split("# the base")[0], reproduce
    assert "  cmdline: mitigations=off\n" in head and "perflab run job-base.yaml --kernel" in head \
        and "perflab run job-head.yaml --kernel" in head, reproduce


def test_compare_decodes_each_run_once(tmp_path, monkeypatch):
    """The note on an operand's variants and its groups' keys decoded every run apart (and what the
    sides measured, their last runs a third time)."""
    from perflab.analysis import variant
    from perflab.analysis.comparison import compare
    from perflab.store import open_store

    path = str(tmp_path / "perflab.db")
    fv.plant(path)
    fv.plant_head(path, "e2")
    calls: collections.Counter = collections.Counter()
    decode = variant.of

    def counted(run):
        calls[run.id] += 1
        return decode(run)

    monkeypatch.setattr(variant, "of", counted)
    compare(open_store(path), ["e1", "e2"])
    assert calls and set(calls.values()) == {1}, calls


def test_a_recipe_built_again_is_one_series_and_the_page_shows_every_compared_variants_trend(tmp_path):
    """Series were keyed by the raw parameters: the recipe built at another commit (another
    `kernel_build`) was a series of its own per tag, and the page, keying the compared rows
    without it, dropped the recipes' and mitigations=off's trends."""
    from perflab.analysis import naming, series
    from perflab.analysis.views.page import Filters, build_page
    from perflab.store import open_store

    path = str(tmp_path / "perflab.db")
    fv.plant(path)
    fv.plant_head(path, "e2")
    store = open_store(path)
    history = series.build(store, benchmark="lmbench")
    naming.name_series(history.series)
    names = sorted(s.name for s in history.series)
    assert names == sorted(f"lmbench {label}" for label in ("amd64", "cloud", "rt", "amd64 mitigations=off",
                                                             "gcc-12", FAST)), names
    assert all(len(s.points) == 2 for s in history.series), [(s.name, len(s.points)) for s in history.series]
    page = build_page(store, Filters(operands=("e1", "e2"), benchmark="lmbench"))
    shown = sorted(r.series.name for r in page.trends.results)
    assert shown == names, shown


def test_tables_scaling_heads_and_notes_print_variant_labels_whole(cli, tmp_path):
    """`report table --cols variant` cut a label to 24 characters (`6.1.192 gcc-12 +CC…(+25)`),
    `report scaling` to 24 and its plot's legend to 30, and compare's note on an operand's
    variants (six labels) at 240 characters: the part that tells the recipes apart was lost."""
    from perflab.core.model import HIGHER_IS_BETTER, Sample
    from perflab.store import open_store

    fv.plant(str(cli.db))
    table = cli("report", "table", fv.METRIC, "--rows", "tag", "--cols", "variant", "--tag", fv.TAG).stdout
    heads = table.splitlines()[1]
    assert heads.rstrip().endswith("6.1.192 gcc-12  6.1.192 gcc-12 +CC_OPTIMIZE_FOR_PERFORMANCE") \
        and "…" not in table, table
    assert re.search(r"^e1\s.*\s3300000\s+3500000$", table, re.MULTILINE), table
    store = open_store(str(cli.db))
    for kernel, extra, release, _, figure in fv.VARIANTS[4:]:
        for tasks in (1, 2):
            fv._run(store, "will-it-scale", kernel, {"test": "getppid1", "mode": "process", "nr_task": tasks, **extra},
                    release, [Sample("will-it-scale.workload", figure * tasks, "ops/s", HIGHER_IS_BETTER)], tag="s1",
                    env_extra={"kernel_recipe_commit": "c0ffee" * 6 + "abcd"})
    scaling = cli("report", "scaling", "s1").stdout
    assert f"s1 6.1.192 gcc-12 +CC_OPTIMIZE_FOR_PERFORMANCE" in scaling and "…" not in scaling, scaling
    out = cli("compare", "e1", "h-6.1.0-55-amd64", "--metric", "syscall.null").stdout
    assert "6.1.192 gcc-12 +CC_OPTIMIZE_FOR_PERFORMANCE), compared variant by variant, never pooled; select one " \
           "with key=value (kernel=RELEASE, cmdline=OPTIONS, cmdline= for none)" in out, out


def test_the_series_mails_job_keeps_the_kernels_boot_options(tmp_path):
    """The series mail's job file dropped the job's kernel, boot options and all, and ran the
    built kernel with --kernel only: mitigations=off was lost from the reproduction."""
    from dataclasses import replace

    from perflab.analysis.regression import SeriesFacts, build
    from perflab.report.regression import render
    from perflab.store import open_store

    path = str(tmp_path / "perflab.db")
    fv.plant(path)
    fv.plant_head(path, "e3", slower="6.1.0-56-amd64 mitigations=off")
    report = build(open_store(path), "e1", "e3", benchmark="lmbench")
    series = SeriesFacts(patch="[PATCH 1/1] x86: one", index=1, total=1, culprit=None, mbox="series.mbox")
    text = render(replace(report, series=series))
    reproduce = text[text.index("To reproduce:"):]
    job = reproduce[:reproduce.index("EOF\n", reproduce.index("cat > job.yaml"))]
    assert "kernel:\n" in job and "  cmdline: mitigations=off\n" in job, reproduce
    assert '--kernel "$KBUILD_OUTPUT/arch/x86/boot/bzImage"' in reproduce, reproduce


def test_a_kernel_kexeced_on_an_ssh_machine_is_not_a_guest():
    """variant.of took any job with a kernel for a guest's: a run on an SSH machine switched to
    debian:6.1.0-56-amd64 by kexec was labelled a tcg guest with 1 vCPU and 512 MiB."""
    from types import SimpleNamespace

    from perflab.analysis import naming, variant

    def run(rid, release, on=True):
        kernel = f"debian:{release}"
        where = {"on": "box1"} if on else {"vm": "tcg"}
        return SimpleNamespace(id=rid, box="box1", benchmark="lmbench", tag="k", commit=None,
                               params={**where, "kernel": kernel} if on else where,
                               job={"benchmark": "lmbench", "kernel": kernel, **({"on": "box1"} if on else {})},
                               environment={"testbox": "box1", "kernel_release": release})

    kexeced = variant.of(run(1, "6.1.0-56-amd64"))
    assert not kexeced.target.guest and kexeced.target.mode == "" and kexeced.target.cpus is None, kexeced.target
    assert variant.of(run(2, "6.1.0-56-amd64", on=False)).target.guest
    labels = naming.variant_labels([kexeced, variant.of(run(3, "6.1.0-56-rt-amd64"))])
    assert labels == ["6.1.0-56 amd64", "6.1.0-56 rt"], labels


def test_three_builds_two_of_one_ref_get_three_labels():
    """The last resort was added once: three builds of one recipe, two at one ref (other build
    keys), were labelled `... ref=A`, `... ref=A`, `... ref=B`: two identities, one label."""
    from dataclasses import replace

    from perflab.analysis import naming, variant

    base = variant.Variant("lab1", "lmbench", "{}", variant.Target(variant.GUEST, "icount", 1, 512),
                           variant.Kernel("6.1.192", "6.1.192", "", variant.RECIPE, recipe="{}", compiler="gcc-12"))
    builds = [replace(base, kernel=replace(base.kernel, ref=ref, build=build))
              for ref, build in (("a" * 40, "k1"), ("a" * 40, "k2"), ("b" * 40, "k3"))]
    labels = naming.variant_labels(builds)
    assert len(set(labels)) == 3, labels
    assert labels[2] == f"6.1.192 gcc-12 ref={'b' * 12}" and labels[0].endswith("build=k1"), labels
