"""The real services the tests start (tests/services.py): they answer, stop and come back on the same port."""

from __future__ import annotations

import os
import socket


def test_redis_server_answers_stops_and_restarts_on_its_port(redis_server):
    assert redis_server.running and redis_server.ping()
    assert redis_server.url == f"redis://127.0.0.1:{redis_server.port}/0"
    pid = redis_server.proc.pid
    redis_server.stop()
    assert not redis_server.ping()
    # Its whole process group is gone, not just the leader.
    try:
        os.killpg(pid, 0)
        alive = True
    except ProcessLookupError:
        alive = False
    assert not alive
    redis_server.start()
    assert redis_server.ping()
    # It listens on loopback only.
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))


def test_postgres_cluster_gives_fresh_databases_and_survives_a_crash(postgres_cluster, postgres_url):
    other = postgres_cluster.create_database()
    try:
        assert postgres_url.endswith("/" + postgres_url.rsplit("/", 1)[1])
        postgres_cluster.sql(other, "CREATE TABLE t (x int)")
        postgres_cluster.sql(other, "INSERT INTO t VALUES (1), (2)")
        # An immediate stop is a crash for PostgreSQL; it recovers at the next start.
        postgres_cluster.stop("immediate")
        assert not postgres_cluster.running
        postgres_cluster.start()
        assert postgres_cluster.sql(other, "SELECT sum(x) FROM t") == [(3,)]
        # Only the superuser and the default databases besides ours: the per-test ones are separate.
        names = {n for (n,) in postgres_cluster.sql("postgres", "SELECT datname FROM pg_database")}
        assert {other, postgres_url.rsplit("/", 1)[1], "postgres", "template0"} <= names
        assert postgres_cluster.sql("postgres", "SHOW listen_addresses") == [("127.0.0.1",)]
    finally:
        postgres_cluster.drop_database(other)


def test_until_looks_once_more_at_its_backstop():
    """A condition that holds by the time the backstop has passed (the test descheduled meanwhile,
    as a loaded machine does) is seen, not reported as timed out; a zero backstop still asks once."""
    import time

    from services import until

    asked = []

    def late():
        asked.append(1)
        if len(asked) == 1:
            time.sleep(0.3)            # the first look outlasts the backstop
            return None
        return "there"

    assert until("the late answer", late, timeout=0.1) == "there"
    assert until("an answer already there", lambda: "now", timeout=0) == "now"
