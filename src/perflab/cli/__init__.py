"""The `perflab` command: one module per command group, each thin.

A command's module is imported only when that command runs or a help page lists it:
`perflab detect` then loads what detect needs, not SQLAlchemy's, pydantic's and
Celery's share of every other command (docs/changepoints.md has the figures).
"""

from __future__ import annotations

import importlib
import os
import sys

import click

from perflab import __version__
from perflab.core.errors import PerflabError

# command name -> the modules of perflab.cli to import for it: the first defines it (in
# its COMMANDS list); the others add subcommands to it (perflab.cli.robot adds
# `report regression`). A new command goes here (one missing is still found, after
# every module has been imported). tests/test_cli_help.py checks the table.
COMMAND_MODULES: dict[str, tuple[str, ...]] = {
    "run": ("run",),
    "jobs": ("jobs",), "rerun": ("jobs",),
    "log": ("history",), "runs": ("history",), "show": ("history",), "annotate": ("history",),
    "compare": ("compare",),
    "detect": ("detect",),
    "report": ("report", "robot"),
    "env": ("env",),
    "export": ("transfer",), "import": ("transfer",),
    "bisect": ("bisect",), "series": ("series",),
    "monitors": ("monitors",),
    "check": ("robot",), "robot": ("robot",),
    "noise": ("noise",),
    "worker": ("lab",), "submit": ("lab",), "queue": ("lab",), "cancel": ("lab",), "serve": ("lab",),
    "kernel": ("kernel",),
}


# command name -> the first paragraph of its help: what the top-level page lists (`perflab --help`
# imports no command module; tests/test_cli_help.py checks each against its command).
COMMAND_SUMMARIES: dict[str, str] = {
    'annotate': 'Attach a comment to a run (shown by `perflab log`).',
    'bisect': 'Find the first commit at which a metric changed, with git bisect and a sequential test.',
    'cancel': 'Cancel a submission: queued jobs are skipped, a running one is stopped (its run kept, interrupted).',
    'check': 'A CI gate: run (or load) the head, compare it with the baseline, exit 1 on a significant regression.',
    'compare': 'Compare a base with one or more heads, metric by metric.',
    'detect': 'Find where the level of each series changed: regressions and improvements in history.',
    'env': 'Print the facts recorded with every run on this machine.',
    'export': 'Write runs with their environments and samples as JSON or CSV.',
    'import': ("Read runs into this store: perflab's own exports (JSON or CSV) and the files of hyperfine "
              '(--export-json), pyperf (-o), Go (`go test -bench` output), Google Benchmark '
              '(--benchmark_format=json) and pytest-benchmark (--benchmark-json).'),
    'jobs': 'Job files: list the shipped ones, split one into its atomic jobs.',
    'kernel': ('Kernels for perflab\'s guests: configurations (docs/vm.md, "Kernel configuration") and Debian\'s '
              'kernels by release (docs/vm.md, "Kernels by name").'),
    'log': 'One line per run, oldest first: date, real, user, sys, status, kernel, tag, commit, comment.',
    'monitors': 'List the monitors, their options and what each records.',
    'noise': "Measure this machine's noise: an A/A of a job (the same job as sides A and B).",
    'queue': "The boxes of the lab: each worker's state and current job, the jobs queued per box.",
    'report': 'Print summaries of stored runs.',
    'rerun': 'Run the atomic job a stored run ran, again, as a new run.',
    'robot': 'The regression robot: test new commits, find level changes, bisect them, report each culprit once.',
    'run': 'Run a benchmark (a family, or a job file) and record every sample with its environment.',
    'runs': 'List runs with their status, testbox, tag and commit.',
    'series': ("Apply a patch series on its base in perflab's own clone, measure base and head, and on a change "
              'name the patch that made it, bisecting inside the series (one patch a step); then revert that '
              'patch on the head and measure it (restores, or interacts with later patches), and label a timed '
              'change by counting base and head (valgrind instructions; icount for a kernel): code path, '
              "timing only, or not reproduced. --out/--to: the robot's mail for it. With --kernel the "
              'repository is a kernel tree and --kernel the image the build makes.'),
    'serve': 'Serve the dashboard, read-only: boxes and queues, recent runs and regressions, the HTML report.',
    'show': 'Every sample of a run and its summary (n, figure, median, stddev, CoV, min, max).',
    'submit': 'Queue the atomic jobs of JOB_FILE on every --box; prints the submission id.',
    'worker': 'Run the atomic jobs queued for BOX, one at a time, into the store (--db).',
}

class LazyGroup(click.Group):
    """A click group that imports a command's modules on first use of the command."""

    def __init__(self, *args, modules: dict[str, tuple[str, ...]], **kwargs):
        super().__init__(*args, **kwargs)
        self.modules = modules
        self.loaded: set[str] = set()

    def list_commands(self, ctx: click.Context) -> list[str]:
        # The table names every command (tests/test_cli_help.py checks it against the modules).
        return sorted({*self.modules, *self.commands})

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # The top-level page lists the commands from COMMAND_SUMMARIES: loading all 16 command
        # modules to read their docstrings cost `perflab --help` 0.1 s (and SQLAlchemy's import).
        self.summaries = True
        try:
            super().format_commands(ctx, formatter)
        finally:
            self.summaries = False

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if getattr(self, "summaries", False) and cmd_name not in self.commands and cmd_name in COMMAND_SUMMARIES:
            return click.Command(cmd_name, help=COMMAND_SUMMARIES[cmd_name])   # the page reads only its help
        if cmd_name not in self.modules and cmd_name not in self.commands:
            self.load_all()   # not in the table: a slow start, never a missing command
        for module_name in self.modules.get(cmd_name, ()):
            self.load(module_name)
        if cmd_name in self.modules and cmd_name not in self.commands:
            # The table names a command its module does not define: a bug, said loudly.
            raise RuntimeError(f"perflab.cli.{self.modules[cmd_name][0]} defines no command {cmd_name!r}")
        return self.commands.get(cmd_name)

    def load(self, module_name: str) -> None:
        if module_name in self.loaded:
            return
        # A command module that fails to import is a bug: it fails loudly, it does not vanish from the CLI.
        module = importlib.import_module(f"perflab.cli.{module_name}")
        for command in getattr(module, "COMMANDS", ()):
            self.add_command(command)
        self.loaded.add(module_name)

    def load_all(self) -> None:
        """Every module of the table, then any other module of perflab.cli."""
        import pkgutil

        names = dict.fromkeys(name for modules in self.modules.values() for name in modules)
        names.update(dict.fromkeys(info.name for info in pkgutil.iter_modules(__path__)))
        for module_name in names:
            self.load(module_name)


@click.group(
    cls=LazyGroup,
    modules=COMMAND_MODULES,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
    no_args_is_help=True,
)
@click.version_option(__version__, "--version", prog_name="perflab")
@click.option("--db", "db", metavar="URL", envvar="PERFLAB_DB",
              help="Store: a SQLite file path or any SQLAlchemy URL "
                   "(default $PERFLAB_DB, else $XDG_DATA_HOME/perflab/perflab.db).")
@click.pass_context
def cli(ctx: click.Context, db: str | None) -> None:
    """perflab: a performance-regression lab for systems software.

    Runs benchmarks, records every sample with its environment, and shows the history.

    \b
    Example:
      perflab run cmd --runs 10 -- gzip -k -f /tmp/big.file
      perflab log
    """
    ctx.obj = {"db": db}


def _one_line(message: object) -> str:
    """An error message as one line that is safe to print: whitespace runs made one
    space, other control characters shown (\\x1b), URL passwords masked, bounded."""
    from perflab.store.rows import redact   # not store.db: SQLAlchemy for every error message
    from perflab.core.text import printable

    return printable(redact(" ".join(str(message).split())), limit=2000)


def _loaded(module: str, name: str) -> tuple[type[BaseException], ...]:
    """The exception class `name` of `module` if a command imported that module, else
    nothing to catch: a module never loaded raised nothing (and `perflab detect` does
    not pay for importing the runner just to name its exceptions)."""
    loaded = sys.modules.get(module)
    return (getattr(loaded, name),) if loaded is not None else ()


class _OneBlasThread:
    """Loads numpy with OpenBLAS on one thread, and leaves the environment as it was.

    OpenBLAS starts a thread per core when numpy is imported, and they spin: on the 2-core
    machine, busy, `import numpy` took 0.16 s instead of 0.06 (and 35 ms more CPU), for a
    harness that multiplies no matrices. OPENBLAS_NUM_THREADS is read when the library is
    loaded, so it is set only while numpy's package runs: a benchmark started later does not
    inherit it, and a user's own setting is left alone."""

    def find_spec(self, name, path=None, target=None):
        if name != "numpy":
            return None
        sys.meta_path.remove(self)
        import importlib.machinery

        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is not None and spec.loader is not None and hasattr(spec.loader, "exec_module"):
            run = spec.loader.exec_module

            def exec_module(module):
                os.environ["OPENBLAS_NUM_THREADS"] = "1"
                try:
                    run(module)
                finally:
                    os.environ.pop("OPENBLAS_NUM_THREADS", None)

            spec.loader.exec_module = exec_module
        return spec


def main(argv: list[str] | None = None) -> int:
    """Entry point: every failure ends as one line on stderr and a non-zero status."""
    if "numpy" not in sys.modules and "OPENBLAS_NUM_THREADS" not in os.environ and not any(
            isinstance(finder, _OneBlasThread) for finder in sys.meta_path):
        sys.meta_path.insert(0, _OneBlasThread())
    try:
        # Without standalone mode click returns the code of a click.exceptions.Exit.
        rc = cli.main(args=argv, prog_name="perflab", standalone_mode=False)
        return rc if isinstance(rc, int) else 0
    except click.exceptions.NoArgsIsHelpError as e:
        click.echo(e.ctx.get_help() if e.ctx else "")
        return 0
    except click.exceptions.Exit as e:
        return e.exit_code
    except click.UsageError as e:
        cmd = e.ctx.command_path if e.ctx else "perflab"
        message = _one_line(e.format_message())
        if e.ctx and isinstance(e.ctx.command, click.Group) and message.startswith("No such command"):
            # e.g. `perflab run foo`: name the benchmarks there are
            message = f"{message.rstrip('.')}; valid: {', '.join(e.ctx.command.list_commands(e.ctx))}"
        click.echo(f"{cmd}: error: {message} (see '{cmd} --help')", err=True)
        return 2
    except click.ClickException as e:
        click.echo(f"perflab: error: {_one_line(e.format_message())}", err=True)
        return e.exit_code
    except PerflabError as e:
        # A job file's problems are all shown, one line each (perflab.jobs.JobErrors).
        for problem in getattr(e, "problems", None) or [e]:
            click.echo(f"perflab: error: {_one_line(problem)}", err=True)
        return e.exit_code
    except _loaded("perflab.runner.recorder", "RunFailed") as e:
        click.echo(f"perflab: run failed: {_one_line(e)}", err=True)
        return 1
    except (KeyboardInterrupt, click.Abort):
        click.echo("perflab: interrupted; the samples recorded so far are kept", err=True)
        return 130
    except _loaded("perflab.execution.interrupt", "Interrupted") as e:
        click.echo(f"perflab: {e}; the samples recorded so far are kept", err=True)
        return 128 + e.signum
    except BrokenPipeError:
        return 0
    except OSError as e:
        # No file name (a write to stdout on a full disk): "perflab: error: No space left on
        # device (writing the output)", not an empty place before a second colon (issue 31, L8).
        what = _one_line(e.strerror or e)
        text = f"{_one_line(e.filename)}: {what}" if e.filename else f"{what} (writing the output)"
        try:
            click.echo(f"perflab: error: {text}", err=True)
        except OSError:
            pass
        return 1
    except Exception as e:  # a bug: still one line, with a way to see the traceback
        if os.environ.get("PERFLAB_DEBUG"):
            raise
        click.echo(f"perflab: internal error: {type(e).__name__}: {_one_line(e)} (PERFLAB_DEBUG=1 shows the traceback)", err=True)
        return 70


def entry() -> None:
    sys.exit(main())
