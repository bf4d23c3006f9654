"""`perflab export` and `perflab import`."""

from __future__ import annotations

import click

from perflab.cli.common import db_option, get_store, parse_since
from perflab.core.errors import PerflabError
from perflab.store.reader import MAX_RUN_ID


@click.command("export")
@click.option("--format", "fmt", type=click.Choice(["json", "csv"]), default="json", show_default=True)
@click.option("--output", "-o", type=click.Path(dir_okay=False, writable=True), help="Write to a file (default stdout).")
@click.option("--benchmark", "-b", help="Benchmark family or run name.")
@click.option("--tag", "-t", help="Only runs with this tag.")
@click.option("--box", help="Only runs on this testbox.")
@click.option("--since", help="Only runs started since a date or an age (3d).")
@click.option("--run", "run_ids", multiple=True, type=click.IntRange(1, MAX_RUN_ID), help="Only these run ids (repeatable).")
@db_option
def export_cmd(fmt, output, benchmark, tag, box, since, run_ids, db) -> None:
    """Write runs with their environments and samples as JSON or CSV.

    \b
    Example:
      perflab export --tag v6.8 -o v6.8.json
      perflab export --format csv --since 7d > week.csv
    """
    from perflab.core import output as outfile
    from perflab.exchange import transfer

    if output:
        outfile.check(output, "-o")

    since_time = parse_since(since)
    store = get_store(db, reading=True)
    rows = store.find_runs(benchmark=benchmark, tag=tag, box=box, since=since_time,
                           ids=list(run_ids) if run_ids else None)
    data = transfer.collect(store, rows)
    text = transfer.to_json(data) if fmt == "json" else transfer.to_csv(data)
    if not output:
        click.echo(text, nl=False)
        return
    # Whole or nothing, through a symlink or into a device or FIFO (core.output).
    outfile.write(output, text, "-o")
    click.echo(f"exported {len(data)} runs to {output}", err=True)


IMPORT_FORMATS = ("auto", "perflab", "hyperfine", "pyperf", "gotest", "gbench", "pytest-benchmark")


@click.command("import")
@click.argument("files", nargs=-1, required=True, type=click.Path())
@click.option("--format", "fmt", type=click.Choice(IMPORT_FORMATS), default="auto", show_default=True,
              help="Format of the files (auto: found from their content).")
@click.option("--tag", "-t", help="Tag every imported run with this label (variant, kernel, patch ...).")
@click.option("--box", help="Testbox of the imported runs (default: the host named in the file, else 'imported').")
@db_option
def import_cmd(files, fmt, tag, box, db) -> None:
    """Read runs into this store: perflab's own exports (JSON or CSV) and the files
    of hyperfine (--export-json), pyperf (-o), Go (`go test -bench` output),
    Google Benchmark (--benchmark_format=json) and pytest-benchmark (--benchmark-json).

    All or nothing: every file's format and syntax are checked before
    anything is written, and the runs stay invisible until the last sample of
    the last file is in; a bad value, Ctrl-C or SIGTERM removes what was
    written. Other perflab commands can write to the store meanwhile. Runs
    already present (same uuid; importing the same file again with the same
    --tag and --box) are skipped.

    \b
    Examples:
      perflab import lab-box1.json
      perflab import --tag before --box $(hostname) hyperfine-before.json
      go test -bench . -count 10 > new.txt && perflab import --tag new new.txt
    """
    import signal

    from perflab.exchange import importers

    # Ctrl-C and SIGTERM end the import with importers.ImportInterrupted, a PerflabError
    # saying that nothing was imported (not the "samples kept" of an interrupted run);
    # a Ctrl-C before import_files takes the signals over says the same.
    try:
        # an SQLite store it can simply add to is written through sqlite3 (perflab.store.recording)
        store = get_store(db, recording=True)
        results = importers.import_files(store, list(files), fmt, tag=tag, box=box)
    except KeyboardInterrupt:
        raise importers.ImportInterrupted("interrupted by Ctrl-C (SIGINT): nothing was imported "
                                          "(nothing had been written)", signal.SIGINT) from None
    for result in results:
        what = "" if result.fmt == "perflab" else f" ({importers.LABELS[result.fmt]}, {result.samples} samples)"
        click.echo(f"{result.path}: imported {result.runs} runs{what}"
                   + (f", skipped {result.skipped} already present" if result.skipped else ""))
        for warning in result.warnings:
            click.echo(f"perflab: warning: {result.path}: {warning}", err=True)


COMMANDS = [export_cmd, import_cmd]
