"""`perflab series --to` checked before any work (issue 45, S6).

An address with CR/LF injected no header, but it was checked only when the mail was made, after
the whole series had been built and measured: `internal error: ValueError`. Now a bad address is
one line naming it before the store is opened or anything is built.
"""

from __future__ import annotations

import pytest

from conftest import assert_one_line_error
from perflab.analysis.regression import check_recipients
from perflab.core.errors import PerflabError
from test_patch_series import _series


@pytest.mark.parametrize("address", ["dev@example.org\r\nBcc: spy@example.org", "dev@example.org\n",
                                     "dev@example.org\x1b[2J", "nobody", ""])
def test_a_bad_address_is_refused_naming_it(address):
    with pytest.raises(PerflabError, match="--to '.*': expected one mail address"):
        check_recipients(["ok@example.org", address])


def test_good_addresses_pass():
    check_recipients(["dev@example.org", "A. Dev <a.dev@example.org>"])


def test_series_refuses_a_bad_to_before_measuring_anything(cli, tmp_path):
    repo, mbox, _ = _series(tmp_path)
    proc = cli("series", "--repo", repo, "--mbox", mbox, "--build", "cc -O1 -o prog prog.c",
               "--metric", "time.elapsed_time", "--to", "dev@example.org\r\nBcc: spy@example.org",
               "--", "./prog", check=False, timeout=600)
    assert_one_line_error(proc, "--to 'dev@example.org\\r\\nBcc: spy@example.org'", "expected one mail address")
    assert not cli.db.exists() or cli.sql("SELECT count(*) FROM run") == [(0,)]


def test_robot_and_report_regression_refuse_a_bad_to_before_any_work(cli, tmp_path):
    """The robot measures and bisects a whole pass before it mails, report regression builds its
    report (and writes --export-base) first: both check --to before any of it."""
    from test_hostile_robot import _setup

    bad = "dev@example.org\r\nBcc: spy@example.org"
    repo, shas, job = _setup(tmp_path)
    proc = cli("robot", "--repo", repo, "--job", job, "--once", "--start", shas[0], "--to", bad,
               check=False, timeout=300)
    assert_one_line_error(proc, "--to 'dev@example.org\\r\\nBcc: spy@example.org'", "expected one mail address")
    assert not cli.db.exists() or cli.sql("SELECT count(*) FROM run") == [(0,)]
    export = tmp_path / "base.json"
    proc = cli("report", "regression", "--base", shas[0], "--head", shas[1], "--export-base", export,
               "--to", bad, check=False)
    assert_one_line_error(proc, "--to 'dev@example.org\\r\\nBcc: spy@example.org'", "expected one mail address")
    assert not export.exists()
