#!/usr/bin/env python3
"""Kernel variants as job axes (issue 36), measured: a boot option and a distribution's flavours.

    python tools/bench/kernel_variants.py [--mode icount] [--keep]
    python tools/bench/kernel_variants.py --builds [--keep]     the 2003 experiment, from linux-source-6.1

One job file, its `kernel:` a list: Debian 6.1.0-56 as it is, the same with `mitigations=off`
on its command line, and its cloud and rt flavours (`debian:RELEASE`, fetched once). lmbench's
processes category (null call, read, write, stat, open/close, select, signals, fork/exec) with
insn-profile under icount, so each figure is exact and each difference says where it is. Prints
`perflab report lmbench` (a row per variant), `compare` of the default against each variant and
`report profile` of the default against mitigations=off. A variant that does not finish is said
so, with its run's error.

--one-tag TAG (issue 44): every variant under one tag, then every view read of that tag: `log`,
`report lmbench TAG` (a row per variant), `detect --tag TAG` (a series per variant line),
`compare` of two variants selected by `kernel=`/`cmdline=`, `report profile` of two kernels
(under icount), `report html` (its distributions' boxes and its trends' names and figures), with
what each variant was decoded as (analysis.variant).
`--release` picks the Debian release (6.1.0-47 and 6.1.0-50 are cached on the shared machine:
`--release 6.1.0-47 --variants default mitigations-off` needs no download).

--builds: the LMbench thread's experiment (one tree, four builds) on the tree of
tools/bench/kernel_bisect.py (linux-source-6.1 committed, its build directory's config):
gcc -O2, gcc -Os (CONFIG_CC_OPTIMIZE_FOR_SIZE), gcc -Os -falign-functions=2 and clang-14, each
a recipe perflab builds (the first build of each is a full one: minutes; `kernel list` shows
them after), then the same lmbench figures per build under icount, and the image sizes.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(HERE / "tools" / "bench"))
from profile_diff import perflab  # noqa: E402 (the bench scripts' one way to run perflab on a store)
RELEASE = "6.1.0-56"
VARIANTS = [("default", f"debian:{RELEASE}-amd64"),
            ("mitigations-off", {"image": f"debian:{RELEASE}-amd64", "cmdline": "mitigations=off"}),
            ("cloud", f"debian:{RELEASE}-cloud-amd64"),
            ("rt", f"debian:{RELEASE}-rt-amd64")]


def build_variants() -> list[tuple[str, dict]]:
    import kernel_bisect as kb

    kb.base_repository()
    # The config the bisection benchmark builds with (perflab's minimal config with ACPI: the
    # repository's perflab.config predates it); without KALLSYMS: System.map names the functions.
    base = {"tree": str(kb.REPO), "ref": kb.BASE_TAG, "config": str(kb.BUILD_OUT / ".config")}
    # perflab's minimal config starts from tinyconfig, which optimises for size: -O2 is the fragment.
    size = {"CONFIG_CC_OPTIMIZE_FOR_SIZE": "y", "CONFIG_CC_OPTIMIZE_FOR_PERFORMANCE": "n"}
    speed = {"CONFIG_CC_OPTIMIZE_FOR_PERFORMANCE": "y", "CONFIG_CC_OPTIMIZE_FOR_SIZE": "n"}
    return [("gcc-O2", {**base, "fragments": [speed], "name": "-gcc-O2"}),
            ("gcc-Os", {**base, "fragments": [size], "name": "-gcc-Os"}),
            ("gcc-Os-align2", {**base, "fragments": [size], "kcflags": "-falign-functions=2", "name": "-gcc-Os-align2"}),
            ("clang-14", {**base, "fragments": [speed], "cc": "clang-14", "name": "-clang14"})]


def _text_size(system_map: Path) -> int:
    """_etext - _text from a System.map: the kernel's code, as the compiler laid it out."""
    marks = {}
    for line in system_map.read_text().splitlines():
        words = line.split()
        if len(words) == 3 and words[2] in ("_text", "_etext"):
            marks[words[2]] = int(words[0], 16)
    return marks.get("_etext", 0) - marks.get("_text", 0)


def _released(kernel, release: str):
    """A variant's kernel key at another Debian release."""
    if isinstance(kernel, dict):
        return {**kernel, "image": kernel["image"].replace(RELEASE, release)}
    return kernel.replace(RELEASE, release)


def views_of_one_tag(db: Path, tag: str, work: Path) -> None:
    """Every view of one tag of variants, as a user reads them (issue 44)."""
    import json

    from perflab.analysis import naming, variant
    from perflab.store import open_store

    store = open_store(str(db))
    runs = [r for r in store.find_runs(tag=tag) if r.status in ("finished", "partial")]
    decoded = [variant.of(r) for r in runs]
    print("== what each run was decoded as (analysis.variant)")
    for r, v, label in zip(runs, decoded, naming.variant_labels(decoded)):
        print(f"#{r.id} {label:<40} target={v.target.kind}/{v.target.mode} release={v.kernel.release} "
              f"flavour={v.kernel.flavour} origin={v.kernel.origin} cmdline={v.kernel.cmdline or '-'} "
              f"fs={v.workdir_fs or '-'}")
    for title, args in (("log", ("log", "--tag", tag)), ("report lmbench", ("report", "lmbench", tag)),
                        ("detect", ("detect", "--tag", tag, "--verbose"))):
        print(f"== {title}")
        print(perflab(db, *args, check=False).stdout)
    with_cmdline = [v for v in decoded if v.kernel.cmdline]
    plain = [v for v in decoded if not v.kernel.cmdline]
    if with_cmdline and plain:
        base = f"tag={tag},kernel={plain[0].kernel.release},cmdline="      # the kernel without boot options
        head = f"tag={tag},cmdline={with_cmdline[0].kernel.cmdline}"
        print(f"== compare {base} {head}")
        print(perflab(db, "compare", base, head, check=False).stdout)
    releases = sorted({v.kernel.release for v in decoded if v.target.icount})
    if len(releases) > 1:
        # Two kernels of the tag under icount: where their instructions differ, per testcase and
        # variant (kernel=RELEASE of the plain kernel selects its boot options too: a section each).
        first, other = releases[0], next((r for r in releases if "-rt-" in r), releases[-1])
        print(f"== report profile kernel={first} kernel={other}")
        print(perflab(db, "report", "profile", f"kernel={first}", f"kernel={other}", "--top", "8",
                      check=False).stdout)
    page = work / "page.html"
    done = perflab(db, "report", "html", "--tag", tag, "-o", page, check=False)
    if done.returncode != 0:
        print(f"report html failed: {done.stderr.strip()[-300:]}")
        return
    from perflab.analysis.views.page import Filters, build_page
    from perflab.report import html_doc

    doc = html_doc.document(build_page(store, Filters(tag=tag)))
    print("== report html: trends", json.dumps([(t["name"], t["metric"], t["y"], t["figure"])
                                                 for t in doc["trends"]])[:2000])
    print("== report html: distributions", json.dumps([[v["label"] for v in d.get("variants", [])]
                                                        for d in doc["distributions"]])[:2000])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mode", default="icount", choices=("icount", "tcg"))
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--variants", nargs="+", help="which of them (default: all)")
    ap.add_argument("--builds", action="store_true", help="the four builds of linux-source-6.1 instead")
    ap.add_argument("--one-tag", metavar="TAG", help="every variant under one tag, then every view of it")
    ap.add_argument("--release", default=RELEASE, help=f"the Debian release (default {RELEASE})")
    args = ap.parse_args()
    variants = build_variants() if args.builds else [(t, _released(k, args.release)) for t, k in VARIANTS]
    args.variants = args.variants or [t for t, _ in variants]
    work = Path(tempfile.mkdtemp(prefix="perflab-kernel-variants-"))
    db = work / "db.sqlite"
    import json

    for tag, kernel in [(t, k) for t, k in variants if t in args.variants]:
        # One job per variant: a variant that does not finish leaves the others' figures.
        job = work / f"{tag}.yaml"
        job.write_text(json.dumps({"benchmark": "lmbench", "only": "processes", "runs": 2, "tag": args.one_tag or tag,
                                   "vm": {"mode": args.mode}, "kernel": kernel,
                                   "monitors": {"insn-profile": {}} if args.mode == "icount" else {}}))
        started = time.monotonic()
        done = perflab(db, "run", job, check=False)
        status = sqlite3.connect(db).execute("SELECT status FROM run WHERE tag = ? ORDER BY id DESC",
                                             (args.one_tag or tag,)).fetchone()
        said = "" if done.returncode == 0 else ": " + (done.stderr.strip().splitlines() or ["?"])[-1][:300]
        print(f"{tag:<16} {json.dumps(kernel):<60} {time.monotonic() - started:6.1f} s  "
              f"{status[0] if status else 'not recorded'}{said}  (load average {os.getloadavg()[0]:.1f})")
    if args.one_tag:
        views_of_one_tag(db, args.one_tag, work)
        print(f"store: {db}" if args.keep else "")
        if not args.keep:
            shutil.rmtree(work)
        return
    finished = [tag for tag, _ in variants if tag in args.variants and sqlite3.connect(db).execute("SELECT 1 FROM run WHERE tag = ? AND status = 'finished'", (tag,)).fetchone()]
    print()
    print(perflab(db, "report", "lmbench", *finished, check=False).stdout)
    for tag in finished[1:]:
        print(f"== compare {finished[0]} {tag}")
        print(perflab(db, "compare", finished[0], tag, check=False).stdout)
    if args.builds:
        from perflab.execution.vm import recipe

        for key, image, size, facts in recipe.builds():
            text = _text_size(image.with_name("System.map"))
            print(f"{facts.get('kernel_build_release', key):<28} bzImage {image.stat().st_size:>9,} B, kernel text "
                  f"{text:>9,} B, built in {facts.get('kernel_build_seconds', '?')} s")
    if args.mode == "icount" and "mitigations-off" in finished:
        print("== where: report profile default mitigations-off")
        print(perflab(db, "report", "profile", "default", "mitigations-off", "--top", "12", check=False).stdout)
    print(f"store: {db}" if args.keep else "")
    if not args.keep:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
