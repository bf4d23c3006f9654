"""What the command modules share: the store option and output helpers."""

from __future__ import annotations

import datetime as dt
import re
from typing import TYPE_CHECKING

import click

from perflab.core.text import printable

if TYPE_CHECKING:
    from perflab.store import Store


def lab_box_options(what: str):
    """--box, --broker and --source-url of the commands that can measure commits on a lab box."""
    def decorate(f):
        f = click.option("--source-url", metavar="URL",
                         help="With --box: where the box fetches the commits (default: --repo's path, for a box "
                              "that shares this filesystem).")(f)
        f = click.option("--broker", metavar="URL", envvar="PERFLAB_BROKER", default=None,
                         help="With --box: the lab's Redis broker (default $PERFLAB_BROKER, else "
                              "redis://127.0.0.1:6379/0).")(f)
        return click.option("--box", metavar="NAME",
                            help=f"{what} on this lab box through its queue: its worker fetches, builds and runs "
                                 "each commit (the store must be the lab's shared --db). Without it, here.")(f)
    return decorate


def db_option(f):
    """`--db URL` on a subcommand, as well as on `perflab` itself."""
    return click.option("--db", "db", metavar="URL", default=None, expose_value=True,
                        help="Store URL or SQLite path (overrides the global --db and $PERFLAB_DB).")(f)


def get_store(db: str | None = None, *, reading: bool = False, recording: bool = False) -> Store:
    """The store of --db; with `reading`, for a command that only reads runs, samples and
    monitor series (log, runs, show, compare, detect, export, report), an SQLite store may
    open without SQLAlchemy (perflab.store.reader); with `recording`, for the commands that add
    runs or a comment and read them (run, import, annotate, check), likewise (perflab.store.recording)."""
    from perflab.execution.filesystem import cleanup_stale

    cleanup_stale()   # test filesystems left mounted by a killed run (one stderr line each)
    ctx = click.get_current_context()
    target = db or (ctx.find_root().obj or {}).get("db")
    if reading:
        from perflab.store.basics import default_url
        from perflab.store.reader import open_reader

        reader = open_reader(target or default_url())
        if reader is not None:
            ctx.call_on_close(reader.close)
            return reader
    if recording:
        from perflab.store.basics import default_url
        from perflab.store.recording import open_recorder

        recorder = open_recorder(target or default_url())
        if recorder is not None:
            return recorder
    from perflab.store import open_store   # SQLAlchemy: only for the commands that need it

    store = open_store(target)
    if reading:
        # Closed when the command returns, as its process would: a process that calls main() again
        # (a test worker, in process) would keep each command's connection until a collection.
        ctx.call_on_close(store.engine.dispose)
    store.reap_dead_runs()
    return store


def local_time(value: dt.datetime | None, fmt: str = "%Y-%m-%d %H:%M") -> str:
    """Stored times are UTC; people read their own clock."""
    if value is None:
        return "-"
    return value.replace(tzinfo=dt.UTC).astimezone().strftime(fmt)


_AGE = re.compile(r"([0-9]+)([wdhm])")
_AGE_UNITS = {"w": 604800, "d": 86400, "h": 3600, "m": 60}


def parse_since(text: str | None) -> dt.datetime | None:
    """'2026-11-01', '2026-11-01T12:00', or a relative '3d', '12h', '30m', '2w'."""
    if not text:
        return None
    age = _AGE.fullmatch(text)
    if not age:
        try:
            value = dt.datetime.fromisoformat(text)
        except ValueError:
            raise click.BadParameter(f"{printable(text, 40)!r} is not a date (YYYY-MM-DD[THH:MM]) or an age like 3d, 12h", param_hint="--since") from None
    try:
        if age:
            digits, unit = age.groups()
            if len(digits) > 12:  # int() of thousands of digits is slow, and any such age overflows
                raise OverflowError
            return dt.datetime.now(dt.UTC).replace(tzinfo=None) - dt.timedelta(seconds=int(digits) * _AGE_UNITS[unit])
        if value.tzinfo is None:
            value = value.astimezone()
        return value.astimezone(dt.UTC).replace(tzinfo=None)
    except (OverflowError, ValueError):  # before year 1 (or after 9999) once in UTC
        raise click.BadParameter(f"{printable(text, 40)!r} is out of range: the calendar runs from year 1 to 9999", param_hint="--since") from None


def fmt_num(value: float | None, width: int = 0) -> str:
    """Four significant figures, the way the C News log and LMbench print."""
    if value is None:
        return "-".rjust(width)
    if value == 0:
        text = "0"
    elif abs(value) >= 1000:
        text = f"{value:.0f}"
    else:
        text = f"{value:.4g}"
    return text.rjust(width)


class FiniteFloat(click.ParamType):
    """A float option that refuses nan and inf (click's FloatRange lets them through).

    `minimum` with `open_min` bounds it below, as FloatRange(min=..., min_open=...).
    """

    name = "float"

    def __init__(self, minimum: float | None = None, open_min: bool = False):
        self.minimum = minimum
        self.open_min = open_min

    def convert(self, value, param, ctx):
        if isinstance(value, float):
            number = value
        else:
            try:
                number = float(value)
            except (TypeError, ValueError):
                self.fail(f"{value!r} is not a number", param, ctx)
        if number != number or number in (float("inf"), float("-inf")):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        if self.minimum is not None and (number < self.minimum or (self.open_min and number == self.minimum)):
            self.fail(f"{value!r} must be {'>' if self.open_min else '>='} {self.minimum:g}", param, ctx)
        return number


# -- where jobs run: the targets' options ---------------------------------------------

def target_params() -> list[click.Option]:
    """The options every registered target declares (perflab.execution.targets: `--on`, `--kernel`,
    `--vm`), made once here for every command that runs jobs."""
    from perflab.execution.targets import registered_options

    return [click.Option([o.flag, o.param], is_flag=True, help=o.help) if o.is_flag else
            click.Option([o.flag, o.param], type=click.Choice(o.choices) if o.choices else None,
                         metavar=None if o.choices else o.metavar, help=o.help)
            for o in registered_options()]


def target_options(command: click.Command) -> click.Command:
    """`command` taking the registered targets' options: `run` (each subcommand), `rerun`, `bisect`,
    `series`, `robot` and `submit`, alike. They are added when the command parses or shows its
    help, not when it is listed (`perflab --help` loads no target), and again each time (a
    target registered later is there too); its callback receives them by parameter name, and
    `placed_on` turns them into job keys."""
    if getattr(command, "takes_targets", False):
        return command
    own = list(command.params)
    get_params = command.get_params

    def with_targets(ctx: click.Context) -> list[click.Parameter]:
        names = {p.name for p in own}
        command.params = [*own, *(p for p in target_params() if p.name not in names)]
        return get_params(ctx)

    command.get_params = with_targets
    command.takes_targets = True
    return command


def placed_on(values: dict) -> dict:
    """The target options given (taken out of `values`, by parameter name) as the job keys they set
    ({"on": "ssh://box"}, {"kernel": PATH, "vm": {"mode": "icount"}}): UsageProblem in one line for
    options of two targets or a value its target refuses."""
    from perflab.execution.targets import option_keys, registered_options

    return option_keys({o.param: values.pop(o.param, None) for o in registered_options()})


def refuse_targets(values: dict, command: str, supported: tuple[str, ...]) -> None:
    """A command that does not run its jobs on every target yet (bisect's steps on an SSH machine):
    UsageProblem in one line naming the option given, before anything is done."""
    from perflab.core.errors import UsageProblem
    from perflab.execution.targets import registered_options

    for o in registered_options():
        if o.param not in supported and values.get(o.param) not in (None, False):
            raise UsageProblem(f"{o.flag}: {command} does not run its jobs there yet; run them with "
                               f"`perflab run JOB {o.flag} ...` (docs/architecture.md, \"Where a process runs\")")


def placed_for_commits(job, values: dict, command: str, programs: bool = True):
    """bisect/series: `--on` (taken out of `values`) puts the job on an SSH machine, as a job file's own
    `on:` does; each commit is then built here and its tree copied there (automate/far_tree.py), which
    only a cmd job uses: anything else is refused in one line, before any step. `programs=False`: the
    commits are kernels kexec'ed there (--kernel), any job runs on them and no tree is copied."""
    from perflab import jobs
    from perflab.automate import far_tree
    from perflab.execution.targets import registered_target

    keys = placed_on(values)
    if keys:
        job = jobs.placed(job, registered_target(keys, job.target.toolchain), "--on")
    if programs and far_tree.machine_of_job(job) is not None:
        far_tree.check_job(job, f"{command} --on")
    return job
