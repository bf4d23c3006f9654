#!/usr/bin/env python3
"""How fast `perflab report html` writes a large report, how big it is, how fast it opens.

Builds a store of 1,000 runs and 50,000 samples (4 testcases x 250 nightly runs, 10
metrics x 5 repetitions each, a 10% step in the middle of one testcase, 20 tags) through
`perflab import`, then per round:

- writes the report with the real command (`perflab report html -o FILE`, the whole
  process: start-up, store, statistics, page) -- target < 3 s;
- measures the file -- target < 10 MB (plotly.js is most of it: the cartesian bundle
  tools/install.sh installs, 1.5 MB, or the plotly package's full one, 4.8 MB);
- opens it in headless Chromium (/usr/bin/chromium through selenium and
  /usr/bin/chromedriver) and reads the load event from the Navigation Timing API
  (loadEventEnd - startTime) -- target < 2 s; and when the charts of the first screen are
  drawn (the page draws charts as they come into view, one per task after it opens).

Prints each figure (median of --rounds) with its ratio to the target. With --compare,
the report of a comparison of two tags is measured too.

    .venv/bin/python tools/bench/html_report.py --rounds 3
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

TARGET_WRITE_S, TARGET_SIZE_MB, TARGET_LOAD_S = 3.0, 10.0, 2.0
TESTCASES, RUNS_EACH, METRICS, REPS = 4, 250, 10, 5


def perflab() -> str:
    here = Path(sys.executable).parent / "perflab"
    return str(here) if here.exists() else (shutil.which("perflab") or "perflab")


def document() -> dict:
    rnd = random.Random(13)
    runs = []
    for t in range(TESTCASES):
        for i in range(RUNS_EACH):
            step = 1.10 if (t == 0 and i >= RUNS_EACH // 2) else 1.0
            samples = []
            for m in range(METRICS):
                level = (m + 1) * 100.0 * (step if m == 0 else 1.0)
                samples += [[f"bench.metric{m}_us", level * (1 + rnd.gauss(0, 0.01)), "us", -1, k] for k in range(REPS)]
            day, minute = divmod(i, 4)
            runs.append({
                "uuid": str(uuid.uuid4()), "testbox": "bench-box", "benchmark": "bench", "name": f"bench t{t}",
                "params": {"test": f"case{t}", "mode": "process"}, "tag": f"v{i * 20 // RUNS_EACH + 1}",
                "commit": f"{t:02x}{i:06x}" + "0" * 32, "dirty": False,
                "started": f"2026-{1 + day // 28:02d}-{1 + day % 28:02d}T{10 + minute:02d}:{t * 10:02d}:00",
                "finished": None, "status": "finished", "comment": "nightly" if i % 50 == 0 else None, "error": None,
                "environment": {"testbox": "bench-box", "kernel_release": f"6.{8 + i // 125}.0", "cc_version": "gcc 12.2.0"},
                "failures": [], "samples": samples})
    return {"format": "perflab-export", "version": 1, "runs": runs}


def chromium():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1400,1000"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)


def load_seconds(path: Path) -> tuple[float, float, int, list]:
    """(load event, first screen's charts drawn, charts drawn then, console errors) of one cold page load.

    A fresh Chromium (a new profile) per load: V8 keeps compiled scripts, and a second
    load of the same 4.8 MB of plotly.js skips most of its parsing; a reader opening a
    mailed report has no such cache. Starting Chromium is outside the measured part."""
    driver = chromium()
    try:
        driver.get("about:blank")
        driver.get(path.resolve().as_uri())
        return _measure(driver)
    finally:
        driver.quit()


def _measure(driver) -> tuple[float, float, int, list]:
    load = driver.execute_script("const n = performance.getEntriesByType('navigation')[0]; return n.loadEventEnd - n.startTime;")
    # Charts near the viewport are drawn one per task after the page opens: wait for that queue.
    deadline = time.monotonic() + 60
    while driver.execute_script("return window.perflabReport ? window.perflabReport.queued() : 0") and time.monotonic() < deadline:
        time.sleep(0.02)
    drawn, charts = driver.execute_script(
        "const m = performance.getEntriesByName('perflab-queue-empty'); const n = performance.getEntriesByType('navigation')[0];"
        "return [m.length ? m[m.length - 1].startTime : n.loadEventEnd, document.querySelectorAll('.js-plotly-plot').length];")
    severe = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    return load / 1000.0, max(load, drawn) / 1000.0, int(charts), severe


def line(name: str, value: float, unit: str, target: float) -> str:
    return f"{name:34} {value:8.2f} {unit:3}  target < {target:g} {unit}  ratio {value / target:5.2f}  {'ok' if value < target else 'MISSED'}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--compare", action="store_true", help="also measure a report of `v1 v20` (a comparison)")
    ap.add_argument("--keep", help="keep the store and reports in this directory")
    args = ap.parse_args()
    work = Path(args.keep or tempfile.mkdtemp(prefix="perflab-html-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, PERFLAB_DB=str(work / "perflab.db"), XDG_CACHE_HOME=str(work / "cache"))
    if not (work / "perflab.db").exists():
        doc = document()
        (work / "doc.json").write_text(json.dumps(doc))
        subprocess.run([perflab(), "import", str(work / "doc.json")], env=env, check=True, capture_output=True)
    samples = TESTCASES * RUNS_EACH * METRICS * REPS
    print(f"store: {TESTCASES * RUNS_EACH} runs, {samples} samples ({work / 'perflab.db'})")
    from perflab.report.html import CARTESIAN_BUNDLE, bundle_banner, plotly_bundle

    bundle = plotly_bundle()
    print(f"plotly.js inlined: {bundle_banner(bundle.read_text(encoding='utf-8')[:400])} ({bundle})"
          + ("" if bundle == CARTESIAN_BUNDLE else "; the cartesian bundle is not installed (tools/install.sh)"))
    with open("/proc/loadavg") as fh:
        print(f"load average at the start: {fh.read().split()[0]} (2 vCPUs)")
    # Each case with the text command that computes the same figures, side by side.
    cases = [("history", [], ["detect"])] + ([("comparison v1 v20", ["v1", "v20"], ["compare", "v1", "v20"])]
                                             if args.compare else [])
    try:
        for name, operands, reference in cases:
            writes, sizes, loads, cpus, screens, texts = [], [], [], [], [], []
            for r in range(args.rounds):
                t0 = time.perf_counter()
                subprocess.run([perflab(), *reference], env=env, capture_output=True, check=True)
                texts.append(time.perf_counter() - t0)
                out = work / f"report-{r}.html"
                t0, c0 = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
                proc = subprocess.run([perflab(), "report", "html", *operands, "-o", str(out)], env=env,
                                      capture_output=True, text=True)
                writes.append(time.perf_counter() - t0)
                c1 = resource.getrusage(resource.RUSAGE_CHILDREN)
                cpus.append(c1.ru_utime - c0.ru_utime + c1.ru_stime - c0.ru_stime)
                if proc.returncode != 0:
                    print(proc.stderr, file=sys.stderr)
                    return 1
                sizes.append(out.stat().st_size / 1e6)
                seconds, first_screen, charts, severe = load_seconds(out)
                loads.append(seconds)
                screens.append(first_screen)
                if severe:
                    print(f"console errors: {severe}", file=sys.stderr)
            print(f"{name}: {proc.stderr.strip()}; {charts} charts on the first screen")
            print("  " + line("write (whole command, median)", statistics.median(writes), "s", TARGET_WRITE_S))
            print("  " + line("  its CPU time (user+sys, median)", statistics.median(cpus), "s", TARGET_WRITE_S))
            print(f"    `perflab {' '.join(reference)}` (the same figures as text): {statistics.median(texts):.2f} s; "
                  f"the report takes {statistics.median(writes) / statistics.median(texts):.2f}x that")
            print("  " + line("size", statistics.median(sizes), "MB", TARGET_SIZE_MB))
            print("  " + line("load event in Chromium (median)", statistics.median(loads), "s", TARGET_LOAD_S))
            print("  " + line("  first screen's charts drawn", statistics.median(screens), "s", TARGET_LOAD_S))
            print(f"  rounds: write {', '.join(f'{x:.2f}' for x in writes)} s; load {', '.join(f'{x:.2f}' for x in loads)} s")
        # Where the load time starts from: a page holding plotly.js alone, the bundle the report
        # carries and the plotly package's full one (the fallback without tools/install.sh).
        from perflab.report.html import _package_bundle, bundle_banner, plotly_bundle

        carried = plotly_bundle()
        for label, bundle in (("carried", carried), ("full", _package_bundle())):
            if label == "full" and bundle == carried:
                continue
            js = bundle.read_text(encoding="utf-8")
            blank = work / f"plotly-only-{label}.html"
            blank.write_text("<!DOCTYPE html><html><body><script>" + js.replace("</script", "<\\/script")
                             + "</script></body></html>")
            alone = statistics.median(load_seconds(blank)[0] for _ in range(args.rounds))
            print(f"reference: a page with {bundle_banner(js)} alone ({len(js) / 1e6:.1f} MB) loads in {alone:.2f} s "
                  f"(median, cold)" + (f": the report's load event is {statistics.median(loads) / alone:.2f}x that "
                                       "(last case)" if label == "carried" else ""))
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    with open("/proc/loadavg") as fh:
        print(f"load average at the end: {fh.read().split()[0]} (2 vCPUs; figures above 1-2 are taken on a busy machine)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
