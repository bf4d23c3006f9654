"""Every command's --help, with the command modules loaded lazily (perflab.cli.LazyGroup):
the table of command modules matches what the modules define, every help page works and
reads the same whether its modules were loaded on demand or all at once, and
`perflab detect` does not import what only other commands need."""

import contextlib
import importlib
import io
import json
import pkgutil
import subprocess
import sys

import click

from perflab import cli as cli_pkg


def _help(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = cli_pkg.main([*argv, "--help"])
    return rc, out.getvalue(), err.getvalue()


def _walk(group: click.Group, path: tuple[str, ...] = ()):
    """(path, command) of every command under `group`, itself included."""
    yield path, group
    ctx = click.Context(group, info_name=path[-1] if path else "perflab")
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        assert command is not None, (path, name)
        if isinstance(command, click.Group):
            yield from _walk(command, (*path, name))
        else:
            yield (*path, name), command


def test_table_matches_the_modules():
    defined: dict[str, str] = {}
    for modules in cli_pkg.COMMAND_MODULES.values():
        for name in modules:
            module = importlib.import_module(f"perflab.cli.{name}")
            for command in module.COMMANDS:
                assert defined.setdefault(command.name, name) == name, command.name
    # each command's first module is the one that defines it; no command is left out
    assert {c: m[0] for c, m in cli_pkg.COMMAND_MODULES.items()} == defined
    # and every module of perflab.cli that defines commands is in the table
    named = {name for modules in cli_pkg.COMMAND_MODULES.values() for name in modules}
    for info in pkgutil.iter_modules(cli_pkg.__path__):
        if hasattr(importlib.import_module(f"perflab.cli.{info.name}"), "COMMANDS"):
            assert info.name in named, f"perflab.cli.{info.name} defines COMMANDS but is not in COMMAND_MODULES"


_PAGES = ("import contextlib, io, json, sys\n"
          "from perflab.cli import main\n"
          "with contextlib.redirect_stdout(io.StringIO()):\n"
          "    assert main(['--version']) == 0\n"
          "assert not [m for m in sys.modules if m.startswith(('perflab.cli.', 'sqlalchemy'))], 'loaded by --version'\n"
          "pages = {}\n"
          "for name in sys.argv[1:]:\n"
          "    argv = name.split()\n"
          "    out = io.StringIO()\n"
          "    with contextlib.redirect_stdout(out):\n"
          "        rc = main([*argv, '--help'])\n"
          "    pages[name] = [rc, out.getvalue()]\n"
          "print(json.dumps(pages))\n")


def _fresh_pages(*names: str) -> dict:
    """The help pages of these commands ('' the top level), asked for in this order by a new process."""
    proc = subprocess.run([sys.executable, "-c", _PAGES, *names], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_every_help_page_works_and_is_the_same_loaded_lazily_or_not():
    # Each top-level page from a process that loads modules only as the pages ask,
    # against all modules loaded here. A group's page comes from a process of its own:
    # a subcommand registered by another module (`report regression`, by
    # perflab.cli.robot) must be listed when nothing else has loaded that module.
    # `--version` loads no command module and not SQLAlchemy.
    cli_pkg.cli.load_all()
    pages = {path: _help(list(path)) for path, _ in _walk(cli_pkg.cli)}
    ctx = click.Context(cli_pkg.cli, info_name="perflab")
    groups = [n for n in cli_pkg.COMMAND_MODULES if isinstance(cli_pkg.cli.get_command(ctx, n), click.Group)]
    assert {"report", "jobs", "run"} <= set(groups)
    lazy = _fresh_pages(*(n for n in sorted(cli_pkg.COMMAND_MODULES) if n not in groups), "")
    for name in groups:
        lazy.update(_fresh_pages(name))

    assert len(pages) > 30
    for path, (rc, out, err) in pages.items():
        assert rc == 0 and err == "", (path, err)
        assert out.startswith(f"Usage: perflab{' ' if path else ''}{' '.join(path)}"), (path, out[:80])
        assert "--help" in out, path
        if len(path) <= 1:
            assert lazy[" ".join(path)] == [rc, out], path
    # the top-level page lists every command of the table
    top = pages[()][1]
    for name in cli_pkg.COMMAND_MODULES:
        assert f"\n  {name} " in top, name


def test_detect_loads_neither_scipy_nor_other_commands(tmp_path):
    """`perflab detect` on a store at the head revision: what it imports (the
    whole-command time of issue 12 depends on it; tools/bench/changepoints.py measures it).
    numpy.ma comes with np.median and np.unique, which the method does without."""
    db = str(tmp_path / "p.db")
    script = ("import json, sys\n"
              "from perflab.cli import main\n"
              f"rc = main(['detect', '--db', {db!r}, '--style', 'json'])\n"
              "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
              "('scipy', 'pydantic', 'rich', 'pandas', 'matplotlib', 'plotly', 'alembic', 'celery', 'redis', 'yaml')"
              " or m.startswith(('perflab.cli.', 'perflab.runner.', 'perflab.execution.', 'perflab.benchmarks.', 'perflab.automate.lab')) or m.startswith('numpy.ma') and m[8:9] in ('', '.'))))\n"
              "sys.exit(rc)\n")
    for _ in range(2):   # the first run creates the store (Alembic), the second only reads it
        proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
    loaded = json.loads(proc.stdout.strip().splitlines()[-1])
    # execution.scratch: the per-run temporary directories the start-up clean-up reaps (issue 23 M10).
    assert loaded == ["perflab.cli.common", "perflab.cli.detect", "perflab.execution.filesystem",
                      "perflab.execution.scratch"], loaded
