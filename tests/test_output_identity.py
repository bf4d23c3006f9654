"""What perflab prints and writes stays byte-identical: the restructuring's safety net.

A fixed store (tests/data/golden/store-export.json, made by make_store_export.py beside it:
lmbench of three variants, a will-it-scale nr_task sweep, a kernbench pair, commands with
vmstat and perf-profile evidence, a 12-commit history with a step) is imported through the
CLI into a temporary SQLite store; then every command of CASES runs against it as the
installed `perflab` command (a subprocess, as a user runs it: nothing here imports perflab,
so the test outlives any move of its modules). Each one's stdout, stderr, exit status and
the files it writes are compared byte for byte with tests/data/golden/NAME.*:

  NAME.out    stdout (always present, possibly empty)
  NAME.err    stderr (present only when the command writes to stderr)
  NAME.html   the page `report html` wrote (normalised, see below)
  NAME.files  the files `jobs split` wrote, in name order, each after a line "==> PATH <=="
  schema.out  the store's schema (sqlite_master), Alembic revision and row count per table

Isolation: HOME, XDG_CONFIG_HOME, XDG_DATA_HOME, XDG_CACHE_HOME and PERFLAB_FS_STATE_DIR
point into the test's tmp directory, every other PERFLAB_* variable is dropped, the store is
given with the global --db option (a path relative to the working directory, the tmp
directory, so that no absolute path can reach an output), TZ=UTC (listings print local
time), LC_ALL=C.UTF-8, and COLUMNS/LINES/colour variables are removed.

Numbers printed in full: a float printed with Python's repr (JSON, CSV, the HTML page's data)
shows the last ulp, which another numpy or scipy release may change (numpy 2.4.6 printed
4.859385156923262 where the golden holds 4.8593851569232624). A number with 15 or more
significant digits is compared within a relative 1e-12, and the failure names its line and
JSON key; everything else, every rounded figure of a text layout included, stays byte for byte
(full_precision_difference; docs/dependencies.md).

Normalisation (the only differences allowed, each one explicit and checked to apply
exactly once, so that no real content can be normalised away):
  * `report html` inlines plotly.js, which depends on what is installed (the 4.8 MB bundle of
    the plotly package, or tools/install.sh's cartesian bundle): the test points
    $PERFLAB_PLOTLY_JS at a four-line stub (STUB_PLOTLY below), so the page carries that
    instead. This is an input, not a rewrite of the output.
  * In the page's data, "generated":"<UTC time of the run>" becomes
    "generated":"<normalised: generation time>" (a clock reading).
  * In the page's data, "version":"<perflab.__version__>" becomes
    "version":"<normalised: perflab version>" (a release number, not behaviour).
Every other output was checked to be identical over two runs of the original tree.

Cost: 28 perflab processes, about 20 s of CPU in all, run two at a time on a 2-CPU machine
after the import (29-34 s of wall time measured with the load average at 5-8 on 2 CPUs).
Under pytest-xdist each worker that draws one of these tests builds the store and runs the
commands once (a module fixture).

Regenerating the goldens: `PERFLAB_REGEN_GOLDEN=1 python -m pytest tests/test_output_identity.py`
writes tests/data/golden/* (and GENERATED_FROM, the revision they came from) instead of
comparing. Only do that from the pre-restructuring tree (8f2683e) -- e.g. in a
`git worktree add /tmp/base 8f2683e` with its own virtualenv -- or when a change of
behaviour is intended and reviewed; never to make a restructuring commit pass.
"""

from __future__ import annotations

import concurrent.futures
import difflib
import os
import re
import shutil
import sqlite3
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import PERFLAB

GOLDEN = Path(__file__).parent / "data" / "golden"
FIXTURE = GOLDEN / "store-export.json"
REGEN = os.environ.get("PERFLAB_REGEN_GOLDEN") == "1"
STUB_PLOTLY = "/**\n* plotly.js (perflab golden stub) v0.0.0\n*/\nwindow.Plotly = null;\n"
STORE = "store.db"

# Run ids after the import (the file's order): lmbench 1-5 (5: gcc-13, partial, a failure),
# will-it-scale 6-29, kernbench 30-33, cmd 34-37 (34: gzip -1 of base, with vmstat; 35: gzip -9
# of base, with vmstat and perf-profile), the history 38-49 (44: with a comment).


@dataclass(frozen=True)
class Case:
    name: str
    argv: tuple[str, ...]
    status: int = 0
    html: str | None = None          # a page the command writes (relative path)
    split_dir: str | None = None     # a directory of files the command writes


CASES = [
    # compare, in every --style (registry.LAYOUTS): the full comparison in the text layouts that
    # stay small; the bulky ones on one benchmark each (the layout code is the same for every row).
    Case("compare-lkp", ("compare", "base", "head")),
    Case("compare-mmtests", ("compare", "base", "head", "--style", "mmtests", "-b", "will-it-scale", "--metric",
                             "workload")),
    Case("compare-lmbench", ("compare", "base", "head", "--style", "lmbench")),
    Case("compare-lmbench-3", ("compare", "base", "head", "gcc-13", "-b", "lmbench", "--style", "lmbench")),
    Case("compare-kernbench", ("compare", "base", "head", "--style", "kernbench", "-b", "kernbench")),
    Case("compare-kernbench-cmd", ("compare", "base", "head", "--style", "kernbench", "-b", "cmd")),
    Case("compare-benchstat", ("compare", "base", "head", "--style", "benchstat")),
    Case("compare-json", ("compare", "base", "head", "--style", "json", "-b", "cmd", "--metric", "elapsed",
                          "--metric", "osq_lock")),
    Case("compare-csv", ("compare", "base", "head", "--style", "csv", "-b", "kernbench")),
    Case("compare-monitors-all", ("compare", "base", "head", "-b", "cmd", "--monitors", "all")),
    Case("compare-monitors-none", ("compare", "base", "head", "-b", "cmd", "--monitors", "none", "--style", "benchstat")),
    Case("compare-fail-on", ("compare", "base", "head", "-b", "kernbench", "--style", "mmtests",
                             "--fail-on-regression", "--fail-on", "kernbench.elapsed_time"), status=1),
    # reports
    Case("report-lmbench", ("report", "lmbench", "base", "head", "gcc-13")),
    Case("report-scaling", ("report", "scaling", "base", "head")),
    Case("report-kernbench", ("report", "kernbench", "base", "head")),
    Case("report-profile", ("report", "profile", "base", "head")),
    Case("report-table", ("report", "table", "--rows", "nr_task", "--cols", "mode,tag", "-b", "will-it-scale",
                          "will-it-scale.workload")),
    Case("report-html", ("report", "html", "base", "head", "-b", "kernbench", "--metric", "elapsed_time",
                          "--metric", "system_time", "-o", "report.html"),
         html="report.html"),
    # history and change points
    Case("runs", ("runs",)),
    Case("show", ("show", "35", "--monitors")),
    Case("log", ("log", "./syscall-loop")),
    Case("detect", ("detect", "-b", "./syscall-loop")),
    Case("detect-json", ("detect", "-b", "./syscall-loop", "--style", "json")),
    # exports: a run with monitors and their series, a partial one with a failure; a commented one as CSV
    Case("export-json", ("export", "--format", "json", "--run", "34", "--run", "5")),
    Case("export-csv", ("export", "--format", "csv", "--run", "44")),
    # job files: shipped ones whose expansion does not depend on the CPU count (the scaling
    # job's [1, 50%, 100%] merges points on a 2-CPU machine): a matrix with overrides (--set),
    # and shell commands as file names
    Case("jobs-split", ("jobs", "split", "will-it-scale-seed.yaml", "--set", "test=brk1", "--set",
                        "mode=[process, thread]", "-o", "split"), split_dir="split"),
    Case("jobs-split-cmd", ("jobs", "split", "cmd-example.yaml", "-o", "split-cmd"), split_dir="split-cmd"),
]

GENERATED = re.compile(r'"generated":"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC"')
VERSION = re.compile(r'"version":"[^"\\]*"')


def normalise_html(text: str) -> str:
    """The page's two readings of its circumstances, each required exactly once (module docstring)."""
    for pattern, replacement in ((GENERATED, '"generated":"<normalised: generation time>"'),
                                 (VERSION, '"version":"<normalised: perflab version>"')):
        text, count = pattern.subn(replacement, text)
        assert count == 1, f"report html: {pattern.pattern} matched {count} times, expected once: " \
                           "the normalisation would hide content; look at the page"
    return text


def environment(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("PERFLAB_") and k not in ("COLUMNS", "LINES", "NO_COLOR", "FORCE_COLOR", "CLICOLOR",
                                                           "CLICOLOR_FORCE", "TZ", "LANG", "LANGUAGE")
           and not k.startswith("LC_")}
    for d in ("home", "config", "data", "cache", "fs-state"):
        (tmp / d).mkdir(exist_ok=True)
    (tmp / "plotly-stub.js").write_text(STUB_PLOTLY)
    env.update(HOME=str(tmp / "home"), XDG_CONFIG_HOME=str(tmp / "config"), XDG_DATA_HOME=str(tmp / "data"),
               XDG_CACHE_HOME=str(tmp / "cache"), PERFLAB_FS_STATE_DIR=str(tmp / "fs-state"),
               PERFLAB_PLOTLY_JS=str(tmp / "plotly-stub.js"), TZ="UTC", LC_ALL="C.UTF-8", TERM="dumb")
    return env


def perflab(tmp: Path, env: dict, argv) -> subprocess.CompletedProcess:
    # bytes, not text: the comparison is of bytes
    return subprocess.run([PERFLAB, "--db", STORE, *argv], cwd=tmp, env=env, capture_output=True, timeout=300)


def schema(db: Path) -> bytes:
    """The store's schema as SQLite keeps it, its Alembic revision and each table's row count."""
    con = sqlite3.connect(db)
    try:
        lines = [f"-- {kind} {name} on {table}\n{sql};" for kind, name, table, sql in con.execute(
            "SELECT type, name, tbl_name, sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY type, name")]
        tables = [name for (name,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
        lines.append("-- alembic_version: " + ", ".join(v for (v,) in con.execute("SELECT version_num FROM alembic_version")))
        for t in tables:
            (count,) = con.execute('SELECT count(*) FROM "%s"' % t.replace('"', '""')).fetchone()
            lines.append(f"-- rows in {t}: {count}")
    finally:
        con.close()
    return ("\n".join(lines) + "\n").encode()


def split_files(directory: Path) -> bytes:
    parts = []
    for path in sorted(directory.iterdir()):
        parts.append(f"==> {directory.name}/{path.name} <==\n".encode() + path.read_bytes())
    return b"".join(parts)


@pytest.fixture(scope="module")
def outputs(tmp_path_factory) -> dict[str, dict[str, bytes | int]]:
    """name -> {"status": int, "out": bytes, "err": bytes, and "html"/"files": bytes when the case writes them}.

    Made once a session: under pytest-xdist the first worker to need it runs the 28 commands
    and leaves the outputs beside the workers' directories; the others wait on a lock and read
    them (each worker ran them all before: 20-35 s of CPU each)."""
    import fcntl
    import pickle

    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent
    done = shared / "output-identity.pickle"
    with open(shared / "output-identity.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if done.exists():
            return pickle.loads(done.read_bytes())
        results = _run_cases(tmp_path_factory)
        scratch = done.with_suffix(".tmp")
        scratch.write_bytes(pickle.dumps(results))
        os.replace(scratch, done)
        return results


def _run_cases(tmp_path_factory) -> dict[str, dict[str, bytes | int]]:
    assert PERFLAB, "the perflab command is not installed in this environment"
    tmp = tmp_path_factory.mktemp("identity")
    env = environment(tmp)
    shutil.copyfile(FIXTURE, tmp / FIXTURE.name)
    results: dict[str, dict] = {}
    imported = perflab(tmp, env, ("import", FIXTURE.name))
    results["import"] = {"status": imported.returncode, "out": imported.stdout, "err": imported.stderr}
    if imported.returncode != 0:
        return results   # every case then fails, naming the import's error
    results["schema"] = {"status": 0, "out": schema(tmp / STORE), "err": b""}

    def one(case: Case) -> dict:
        proc = perflab(tmp, env, case.argv)
        got = {"status": proc.returncode, "out": proc.stdout, "err": proc.stderr}
        if case.html:
            page = tmp / case.html
            try:
                got["html"] = normalise_html(page.read_text(encoding="utf-8")).encode() if page.exists() else \
                    b"(not written)"
            except AssertionError as e:   # reported by the case's test, as a difference with the golden
                got["html"] = f"(not compared: {e})".encode()
        if case.split_dir:
            got["files"] = split_files(tmp / case.split_dir) if (tmp / case.split_dir).is_dir() else b"(not written)"
        return got

    # The commands only read the store (SQLite in WAL mode): run them side by side.
    with concurrent.futures.ThreadPoolExecutor(max_workers=min(4, os.cpu_count() or 2)) as pool:
        for case, got in zip(CASES, pool.map(one, CASES)):
            results[case.name] = got
    return results


def _diff(name: str, want: bytes, got: bytes) -> str:
    lines = difflib.unified_diff(want.decode(errors="replace").splitlines(keepends=True),
                                 got.decode(errors="replace").splitlines(keepends=True),
                                 f"golden/{name}", f"now/{name}", n=2)
    text = "".join(lines)
    return text[:6000] + ("\n... (diff cut)" if len(text) > 6000 else "")


def check(name: str, suffix: str, got: bytes, optional: bool = False) -> None:
    """Byte equality with GOLDEN/name.suffix; an optional golden that is absent means empty."""
    path = GOLDEN / f"{name}.{suffix}"
    if REGEN:
        if optional and not got:
            path.unlink(missing_ok=True)
        else:
            path.write_bytes(got)
        return
    want = path.read_bytes() if path.exists() else (b"" if optional else None)
    where = path.relative_to(GOLDEN.parents[2])
    if want is None:
        pytest.fail(f"{where} is missing: goldens are made from tree 8f2683e (see this module's docstring)",
                    pytrace=False)
    if got == want:
        return
    numbers = full_precision_difference(want, got)
    if numbers is None:
        return   # the same text, floats printed in full differ in the last digits only
    if numbers:
        pytest.fail(f"`perflab {name}`: {suffix} differs from {where} in a number printed in full: {numbers} "
                    f"(beyond the relative tolerance {FULL_PRECISION_TOLERANCE:g})", pytrace=False)
    pytest.fail(f"`perflab {name}`: {suffix} differs from {where} ({len(got)} bytes now, {len(want)} in the "
                f"golden); the outputs must stay byte-identical. Diff (golden -> now):\n"
                f"{_diff(f'{name}.{suffix}', want, got)}", pytrace=False)


# A float printed in full (Python's repr: JSON, CSV, the HTML page's data) shows digits no
# rounding hides, so one ulp of difference from another numpy or scipy release changes its
# last digits. Such a number, and only such a number (at least FULL_DIGITS significant
# digits on one side), is compared within FULL_PRECISION_TOLERANCE; every other character,
# every rounded figure of a text layout included, stays byte for byte.
NUMBER = re.compile(rb"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
FULL_DIGITS = 15
FULL_PRECISION_TOLERANCE = 1e-12


def _significant_digits(token: bytes) -> int:
    mantissa = token.lstrip(b"-").split(b"e")[0].split(b"E")[0].replace(b".", b"")
    return len(mantissa.lstrip(b"0"))


def full_precision_difference(want: bytes, got: bytes) -> str | None:
    """None when `got` is `want` but for floats printed in full that agree within the tolerance;
    else the first such number that does not, with its line and (in JSON) its key, or "" when the
    text around the numbers differs (then the caller shows the diff)."""
    if NUMBER.sub(b"#", want) != NUMBER.sub(b"#", got):
        return ""
    for w, g in zip(NUMBER.finditer(want), NUMBER.finditer(got)):
        if w[0] == g[0]:
            continue
        line = want.count(b"\n", 0, w.start()) + 1
        where = f"line {line}{_json_key(want, w.start())}: {w[0].decode()} in the golden, {g[0].decode()} now"
        if max(_significant_digits(w[0]), _significant_digits(g[0])) < FULL_DIGITS:
            return where + " (a rounded figure: must be identical)"
        a, b = float(w[0]), float(g[0])
        if abs(a - b) > FULL_PRECISION_TOLERANCE * max(abs(a), abs(b)):
            return where
    return None


def _json_key(text: bytes, offset: int) -> str:
    """', key "K"' for the JSON member whose value starts at `offset`, when there is one."""
    before = text[max(0, offset - 200):offset]
    match = re.search(rb'"([^"\\]{1,80})"\s*:\s*\[?\s*$', before)
    return f', key "{match[1].decode(errors="replace")}"' if match else ""


def _check_case(outputs, name: str, status: int) -> None:
    if "schema" not in outputs and name != "import":
        pytest.fail(f"the import of the fixture failed: {outputs['import']['err'].decode(errors='replace')}",
                    pytrace=False)
    got = outputs[name]
    if got["status"] != status:
        pytest.fail(f"`perflab {name}` exited {got['status']}, expected {status}; stderr:\n"
                    + got["err"].decode(errors="replace")[-3000:], pytrace=False)
    check(name, "out", got["out"])
    check(name, "err", got["err"], optional=True)
    if "html" in got:
        check(name, "html", got["html"])
    if "files" in got:
        check(name, "files", got["files"])


def test_import(outputs):
    _check_case(outputs, "import", 0)


def test_schema(outputs):
    """The database schema the migrations make, byte for byte."""
    _check_case(outputs, "schema", 0)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_output(outputs, case):
    _check_case(outputs, case.name, case.status)


def test_every_golden_is_checked():
    """No stale golden file: each one belongs to a case (a renamed case leaves none behind)."""
    names = {"import", "schema", *(c.name for c in CASES)}
    known = {"store-export.json", "make_store_export.py", "find_ties.py", "README.md", "GENERATED_FROM"}
    stale = sorted(p.name for p in GOLDEN.iterdir()
                   if p.is_file() and p.name not in known and p.name.rsplit(".", 1)[0] not in names)
    assert not stale, f"golden files no case produces: {stale}"


@pytest.fixture(scope="module", autouse=True)
def _record_origin():
    """When regenerating, write down which tree the goldens came from."""
    yield
    if REGEN:
        root = Path(__file__).resolve().parent.parent
        rev = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--", "src"], capture_output=True,
                               text=True).stdout.strip()
        (GOLDEN / "GENERATED_FROM").write_text(f"{rev or 'unknown revision'}{' (src/ modified)' if dirty else ''}\n")


def test_a_float_printed_in_full_may_differ_in_its_last_ulp_and_nothing_else_may():
    golden = b'{"ci_low": 4.8593851569232624, "n": 3, "mean": "4.86 ms"}\n'
    assert full_precision_difference(golden, golden.replace(b"4.8593851569232624", b"4.859385156923262")) is None
    # a rounded figure is not a float printed in full: one digit is a change
    assert "rounded figure" in full_precision_difference(golden, golden.replace(b"4.86 ms", b"4.87 ms"))
    # beyond the tolerance, named by line and key
    assert full_precision_difference(golden, golden.replace(b"4.8593851569232624", b"4.859385156933262")) == \
        'line 1, key "ci_low": 4.8593851569232624 in the golden, 4.859385156933262 now'
    # a short repr one ulp away prints long: still the same number
    assert full_precision_difference(b"x,0.3\n", b"x,0.30000000000000004\n") is None
    assert full_precision_difference(b"x,3\n", b"x,4\n") == "line 1: 3 in the golden, 4 now (a rounded figure: must be identical)"
    # text around the numbers is compared byte for byte
    assert full_precision_difference(golden, golden.replace(b'"n"', b'"m"')) == ""
