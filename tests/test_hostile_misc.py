"""Issue 23's low items on the command line: each a one-line error naming what is at fault."""

from __future__ import annotations

import sqlite3

import pytest

from conftest import assert_one_line_error


def test_rerun_of_a_stored_job_that_is_not_json_names_the_run(cli):       # L2
    cli("run", "cmd", "--", "true")
    con = sqlite3.connect(cli.db)
    con.execute("UPDATE run SET job = '{not json' WHERE id = 1")
    con.commit()
    con.close()
    for args in (("rerun", "1"), ("show", "1")):
        proc = cli(*args, check=False)
        assert_one_line_error(proc, "run #1", "not valid JSON")
        assert "internal error" not in proc.stderr


def test_jobs_split_of_a_directory_says_it_is_a_directory(cli, tmp_path):    # L4
    (tmp_path / "d").mkdir()
    assert_one_line_error(cli("jobs", "split", tmp_path / "d", check=False), "is a directory")


@pytest.mark.parametrize("where", ["/proc", "/sys"])
def test_an_unwritable_dir_is_refused_before_anything_runs_naming_dir(cli, where):   # L5
    proc = cli("run", "fio", "--dir", where, "--size", "1M", "--runtime", "1", check=False)
    assert_one_line_error(proc, "parameter dir", where)
    assert not cli.db.exists() or cli.sql("SELECT count(*) FROM run") == [(0,)]


def test_fs_size_without_fs_is_an_error(cli, tmp_path):     # L6
    proc = cli("run", "fio", "--fs-size", "2G", "--size", "1M", check=False)
    assert_one_line_error(proc, "fs_size", "give fs too")
    job = tmp_path / "j.yaml"
    job.write_text("benchmark: will-it-scale\ntest: brk1\nfs_size: 2G\n")
    assert_one_line_error(cli("run", job, check=False), "fs_size", "give fs too")


def test_a_bad_broker_url_is_refused_before_anything_is_written(cli, tmp_path, redis_server):     # L8
    import redis

    job = tmp_path / "j.yaml"
    job.write_text("benchmark: cmd\nargv: [true]\n")
    base = redis_server.url.rsplit("/", 1)[0]
    for url in (f"{base}/abc", base.replace(str(redis_server.port), "port") + "/0"):
        proc = cli("submit", job, "--box", "b1", "--broker", url, check=False)
        assert_one_line_error(proc, "broker URL", "DB a number")
    assert redis.Redis.from_url(redis_server.url).dbsize() == 0     # no box registered, nothing queued
