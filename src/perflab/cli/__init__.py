"""The `perflab` command: one module per command group, each thin."""

from __future__ import annotations

import os
import sys

import click

from perflab import __version__
from perflab.errors import PerflabError


@click.group(
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


def _register() -> None:
    # A command module that fails to import is a bug: it must fail loudly, not vanish from the CLI.
    from perflab.cli import bisect, compare, detect, env, history, jobs, lab, monitors, report, robot, run, transfer

    for module in (run, jobs, history, compare, detect, report, env, transfer, bisect, monitors, robot, lab):
        for command in module.COMMANDS:
            cli.add_command(command)


_register()


def _one_line(message: object) -> str:
    """An error message as one line that is safe to print: whitespace runs made one
    space, other control characters shown (\\x1b), URL passwords masked, bounded."""
    from perflab.store.db import redact
    from perflab.text import printable

    return printable(redact(" ".join(str(message).split())), limit=2000)


def main(argv: list[str] | None = None) -> int:
    """Entry point: every failure ends as one line on stderr and a non-zero status."""
    from perflab.runner.recorder import Interrupted, RunFailed

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
        click.echo(f"perflab: error: {_one_line(e)}", err=True)
        return e.exit_code
    except RunFailed as e:
        click.echo(f"perflab: run failed: {_one_line(e)}", err=True)
        return 1
    except (KeyboardInterrupt, click.Abort):
        click.echo("perflab: interrupted; the samples recorded so far are kept", err=True)
        return 130
    except Interrupted as e:
        click.echo(f"perflab: {e}; the samples recorded so far are kept", err=True)
        return 128 + e.signum
    except BrokenPipeError:
        return 0
    except OSError as e:
        where = f" {_one_line(e.filename)}" if e.filename else ""
        click.echo(f"perflab: error:{where}: {_one_line(e.strerror or e)}", err=True)
        return 1
    except Exception as e:  # a bug: still one line, with a way to see the traceback
        if os.environ.get("PERFLAB_DEBUG"):
            raise
        click.echo(f"perflab: internal error: {type(e).__name__}: {_one_line(e)} (PERFLAB_DEBUG=1 shows the traceback)", err=True)
        return 70


def entry() -> None:
    sys.exit(main())
