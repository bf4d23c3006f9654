"""Import the files people already have: one module per format, one small interface.

Each format module has NAME, LABEL (how messages name it), KIND ("json" or
"text"), sniff(doc or text) -> score (0: not this format) and
parse(Document or lines, Context), which hands runs and samples to the
context as it reads them. `import_files` finds each file's format by content
(never by file name) and checks its syntax before anything is written, then
streams the runs into the store (perflab.store.importing): invisible until the
whole import is written, removed on any error or signal. The mapping of each
format is in docs/importers.md.
"""

from __future__ import annotations

import re
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from perflab.exchange import transfer
from perflab.core.errors import PerflabError
from perflab.exchange.importers import gbench, gotest, hyperfine, pyperf, pytest_benchmark, source
from perflab.exchange.importers.base import Context, ImportFailed, Problem, Sink

MODULES = {m.NAME: m for m in (hyperfine, pyperf, gotest, gbench, pytest_benchmark)}
# --format choices, "auto" first; perflab's own export is handled by perflab.exchange.transfer.
FORMATS = ("auto", "perflab", *MODULES)
LABELS = {"perflab": "a perflab export", **{name: m.LABEL for name, m in MODULES.items()}}
TRIED = "tried: " + ", ".join(FORMATS[1:])


# Keys whose presence in a file that is not valid JSON still tells what it was meant to be.
_JSON_HINTS = (
    ("perflab", re.compile(r'"format"\s*:\s*"perflab')),
    ("pytest-benchmark", re.compile(r'"(machine_info|commit_info)"\s*:')),
    ("gbench", re.compile(r'"(context|run_type|time_unit)"\s*:')),
    ("pyperf", re.compile(r'"(perf_version|warmups)"\s*:')),
    ("hyperfine", re.compile(r'"results"\s*:')),
)


def _detect_json(doc) -> tuple[str | None, list[str]]:
    """(format, []) when one format wins, (None, [tied formats]) otherwise."""
    if transfer.is_export(doc):
        return "perflab", []
    scores = {name: m.sniff(doc) for name, m in MODULES.items() if m.KIND == "json"}
    best = max(scores.values())
    if best == 0:
        return None, []
    top = [name for name, score in scores.items() if score == best]
    return (top[0], []) if len(top) == 1 else (None, top)


def _unrecognised_json(path: str, doc, tied: list[str]) -> PerflabError:
    if tied:
        keys = sorted(doc) if isinstance(doc, dict) else []
        return ImportFailed(
            f"{path}: not a recognised benchmark file ({TRIED}): not a perflab export, and its keys "
            f"({', '.join(repr(k) for k in keys)}) could be {', '.join(tied[:-1])} or {tied[-1]}, "
            f"with none of the keys that tell them apart; name the format with --format")
    kind = "object" if isinstance(doc, dict) else "list" if isinstance(doc, list) else "value"
    return ImportFailed(
        f"{path}: not a recognised benchmark file ({TRIED}): a JSON {kind} that is not a perflab export "
        "(no \"format\": \"perflab-export\") and has none of the keys the other tools write "
        "('results', 'benchmarks', 'context', 'machine_info')")


def _problem(path: str, label: str, e: Problem, explicit: str | None, looks: str | None) -> ImportFailed:
    where = f"{path}:{e.line}" if e.line else path
    if explicit:
        hint = f" (the file looks like {LABELS[looks]})" if looks and looks != explicit else ""
        return ImportFailed(f"{where}: --format {explicit}: {e}{hint}")
    return ImportFailed(f"{where}: looks like {label} but {e}")


class ImportInterrupted(PerflabError):
    """Ctrl-C or SIGTERM during an import: what was written has been removed."""

    def __init__(self, message: str, signum: int):
        super().__init__(message)
        self.exit_code = 128 + signum


class _Stopped(Exception):
    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


_SIGNAL_NAMES = {signal.SIGINT: "Ctrl-C (SIGINT)", signal.SIGTERM: "SIGTERM"}


@contextmanager
def _signals_deferred() -> Iterator[Callable[[], None]]:
    """SIGINT and SIGTERM set a flag; the import looks at it between two
    transactions (the check raises _Stopped), so that no signal lands inside
    the database driver and what was written can be removed cleanly."""
    received: list[int] = []

    def check() -> None:
        if received:
            raise _Stopped(received[0])

    if threading.current_thread() is not threading.main_thread():
        yield check
        return
    previous = {sig: signal.signal(sig, lambda signum, _frame: received.append(signum))
                for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield check
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@dataclass
class Planned:
    """A file whose format is known and whose syntax is checked; nothing written yet."""

    path: str
    fmt: str
    opened: source.Opened
    explicit: str | None
    looks: str | None


@dataclass
class Imported:
    """What one file added to the store."""

    path: str
    fmt: str
    runs: int
    skipped: int
    samples: int
    warnings: list[str] = field(default_factory=list)


def plan(path: str, fmt: str = "auto", check: Callable[[], None] = lambda: None) -> Planned:
    """Tell the format of one file and check its syntax; raises PerflabError (one line)."""
    if fmt not in FORMATS:
        raise PerflabError(f"unknown format {fmt!r}: expected one of {', '.join(FORMATS)}")
    try:
        opened = source.open_file(path, check)
    except OSError as e:
        raise PerflabError(f"{path}: {e.strerror or e}") from None
    except source.NotText:
        raise PerflabError(f"{path}: not a text file (nor gzip-compressed text); {TRIED}") from None
    except source.BadGzip as e:
        raise PerflabError(f"{path}: a gzip file that cannot be decompressed ({e})") from None
    explicit = None if fmt == "auto" else fmt
    doc, json_error = opened.doc, opened.json_error
    head = opened.head.lstrip()

    looks, tied = None, []
    if doc is not None:
        looks, tied = _detect_json(doc.header)
    elif json_error is not None:
        looks = next((name for name, rx in _JSON_HINTS if rx.search(opened.text)), None)
    elif head.startswith("uuid,"):
        looks = "perflab"
    elif gotest.sniff(opened.head):
        looks = "gotest"
    chosen = explicit or looks

    if json_error is not None and (chosen is None or chosen == "perflab" or MODULES[chosen].KIND == "json"):
        what = f"looks like {LABELS[chosen]} but is" if chosen and not explicit else (f"--format {explicit}: it is" if explicit else "it is")
        raise ImportFailed(f"{path}:{json_error.lineno}: {what} not valid JSON ({json_error.msg})")
    if chosen is None:
        if doc is not None:
            raise _unrecognised_json(path, doc.header, tied)
        raise ImportFailed(
            f"{path}: not a recognised benchmark file ({TRIED}): neither JSON, nor a perflab CSV export, "
            "nor Go benchmark output (no 'BenchmarkName N value unit' line)")

    is_json = opened.kind == "json"
    if chosen == "perflab":
        if not is_json and not head.startswith("uuid,"):
            raise ImportFailed(f"{path}: --format perflab: neither a perflab JSON export nor a perflab CSV export"
                               + (f" (the file looks like {LABELS[looks]})" if looks else ""))
        if doc is not None and not transfer.is_export(doc.header):
            hint = f" (the file looks like {LABELS[looks]})" if looks else ""
            raise ImportFailed(f"{path}: --format perflab: not a perflab export (no \"format\": \"perflab-export\" key){hint}")
        return Planned(path, chosen, opened, explicit, looks)

    module = MODULES[chosen]
    if module.KIND == "json" and not is_json:
        raise ImportFailed(f"{path}: --format {chosen}: {LABELS[chosen]} is JSON, and this file is not"
                           + (f" (it looks like {LABELS[looks]})" if looks else ""))
    if module.KIND == "text" and is_json:
        raise ImportFailed(f"{path}: --format {chosen}: {LABELS[chosen]} is text, and this file is JSON"
                           + (f" (it looks like {LABELS[looks]})" if looks else ""))
    return Planned(path, chosen, opened, explicit, looks)


class _Checked(Sink):
    """Checks each run's fields (after --tag/--box on a perflab export) on its way to the writer."""

    def __init__(self, writer, path: str, tag: str | None, box: str | None, override: bool):
        self.writer, self.path, self.tag, self.box, self.override = writer, path, tag, box, override
        self.count = 0

    def add_run(self, run: dict) -> int:
        index = self.count
        self.count += 1
        if self.override:
            if self.tag:
                run["tag"] = self.tag
            if self.box:
                run["testbox"] = self.box
                run["environment"] = {**run["environment"], "testbox": self.box}
        return self.writer.add_run(transfer.check_run_fields(run, f"{self.path}: run {index}"))

    def add_samples(self, handle: int, rows) -> None:
        self.writer.add_samples(handle, rows)


def _write(planned: Planned, writer, tag: str | None, box: str | None) -> list[str]:
    """Stream one planned file into the writer; returns its warnings."""
    path, opened = planned.path, planned.opened
    sink = _Checked(writer, path, tag, box, override=planned.fmt == "perflab")
    try:
        if planned.fmt == "perflab":
            if opened.doc is not None:
                runs = transfer.stream_json(path, opened.doc)
            else:
                # A CSV export repeats the run's fields on every line: its samples take far
                # less memory than its text, so it is read whole.
                runs = transfer.read_text(path, opened.whole_text())
            for run in runs:
                sink.add_samples(sink.add_run(run), run["samples"])
            return []
        module = MODULES[planned.fmt]
        ctx = Context(path=path, digest=opened.digest, mtime=opened.mtime, sink=sink, fmt=planned.fmt,
                      tag=tag, box=box)
        module.parse(opened.doc if module.KIND == "json" else opened.lines(), ctx)
        return ctx.warnings
    except Problem as e:
        raise _problem(path, LABELS[planned.fmt], e, planned.explicit, planned.looks) from None
    except source.NotText:
        raise ImportFailed(f"{path}: not a text file (nor gzip-compressed text); {TRIED}") from None
    except source.BadGzip as e:
        raise ImportFailed(f"{path}: a gzip file that cannot be decompressed ({e})") from None


def import_files(store, paths: list[str], fmt: str = "auto", tag: str | None = None,
                 box: str | None = None) -> list[Imported]:
    """Import files into the store, all or nothing.

    Every file's format and syntax are checked first; then their runs are
    streamed into the store in short transactions, invisible until the last
    one (perflab.store.importing). A bad value, a signal or any error removes
    what was written and raises a one-line PerflabError.
    """
    with _signals_deferred() as check:
        writer = None
        try:
            planned = [plan(path, fmt, check) for path in paths]
            writer = store.begin_import(check)
            warnings = []
            for item in planned:
                writer.begin_file()
                warnings.append(_write(item, writer, tag, box))
            counts = writer.commit()
        except BaseException as e:
            wrote = writer is not None and writer.wrote_anything
            if writer is not None:
                try:
                    writer.rollback()
                except PerflabError as cleanup:
                    raise PerflabError(
                        f"{_reason(e)}; removing what was written failed ({cleanup}): those runs stay "
                        "invisible (status 'importing') and the next perflab command removes them") from None
            if isinstance(e, _Stopped):
                what = "the runs written so far were removed" if wrote else "nothing had been written"
                raise ImportInterrupted(f"{_reason(e)}: nothing was imported ({what})", e.signum) from None
            raise
    return [Imported(item.path, item.fmt, c.runs, c.skipped, c.samples, w)
            for item, c, w in zip(planned, counts, warnings)]


def _reason(e: BaseException) -> str:
    if isinstance(e, _Stopped):
        return f"interrupted by {_SIGNAL_NAMES.get(e.signum, f'signal {e.signum}')}"
    return str(e) if isinstance(e, PerflabError) else f"{type(e).__name__}: {e}"
