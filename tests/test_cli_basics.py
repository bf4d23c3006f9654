"""The CLI's surface: help, version, examples, and bad-input errors."""

import os
import re

from conftest import assert_one_line_error

import perflab


def test_help_lists_commands(cli):
    out = cli("--help").stdout
    for name in ("run", "log", "runs", "show", "annotate", "env", "export", "import"):
        assert re.search(rf"^\s+{name}\s", out, re.M), name


def test_every_command_help_has_an_example(cli):
    for args in (["run"], ["run", "cmd"], ["log"], ["runs"], ["show"], ["annotate"], ["env"], ["export"], ["import"]):
        out = cli(*args, "--help").stdout
        assert "Example" in out, args


def test_version(cli):
    out = cli("--version").stdout
    assert perflab.__version__ in out and "perflab" in out


def test_unknown_subcommand(cli):
    assert_one_line_error(cli("frobnicate", check=False), "frobnicate")


def test_unknown_option(cli):
    assert_one_line_error(cli("log", "--bogus", check=False), "--bogus")


def test_unknown_run_id(cli):
    cli("run", "cmd", "--runs", "1", "--", "true")
    assert_one_line_error(cli("show", "999", check=False), "999")
    assert_one_line_error(cli("show", "abc", check=False), "abc")
    assert_one_line_error(cli("annotate", "999", "x", check=False), "999")


def test_invalid_db_url(cli):
    proc = cli("--db", "nosuchdialect://x/y", "log", check=False)
    assert_one_line_error(proc, "nosuchdialect://x/y")


def test_corrupt_database(cli, tmp_path):
    bad = tmp_path / "corrupt.db"
    bad.write_bytes(b"this is not a database at all" * 100)
    before = bad.read_bytes()
    proc = cli("--db", bad, "run", "cmd", "--runs", "1", "--", "true", check=False)
    assert_one_line_error(proc, str(bad))
    assert bad.read_bytes() == before


def test_unwritable_database(cli, tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir()
    os.chmod(locked, 0o500)
    try:
        if os.access(locked, os.W_OK):  # root ignores permissions: use a path under a file instead
            target = tmp_path / "afile" / "perflab.db"
            (tmp_path / "afile").write_text("x")
        else:
            target = locked / "perflab.db"
        proc = cli("--db", target, "log", check=False)
        assert_one_line_error(proc, str(target.parent))
    finally:
        os.chmod(locked, 0o700)


def test_db_option_on_subcommand_and_env(cli, tmp_path):
    other = tmp_path / "other.db"
    cli("run", "cmd", "--runs", "1", "--db", other, "--", "true")
    assert "true" in cli("log", "--db", other).stdout
    assert "true" not in cli("log").stdout
    assert "true" in cli("log", env={"PERFLAB_DB": f"sqlite:///{other}"}).stdout


def test_default_location_follows_xdg(cli, tmp_path):
    env = {"XDG_DATA_HOME": str(tmp_path / "xdg"), "PERFLAB_DB": ""}
    cli("run", "cmd", "--runs", "1", "--", "true", env=env)
    assert (tmp_path / "xdg" / "perflab" / "perflab.db").exists()
