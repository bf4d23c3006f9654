"""The suite's own order under xdist's worksteal (tests/conftest.py, issue 47 item 2): the longest
tests go to the heads of the workers' shares, the rest keep their collected order."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

import conftest

TESTS = Path(__file__).resolve().parent


class _Config:
    """A worker's config as xdist makes it: its own --dist is "no", the run's is in workerinput
    (conftest.pytest_configure_node puts it there)."""

    def __init__(self, workers: int | None, dist: str = "worksteal"):
        if workers is not None:
            self.workerinput = {"workercount": workers, "perflab_dist": dist}

    def getoption(self, name, default=None):
        return "no" if name == "dist" else default


def _item(file: str, name: str, module_fixture: str | None = None):
    defs = {"tmp_path": [SimpleNamespace(scope="function")], "shared_cache": [SimpleNamespace(scope="session")]}
    if module_fixture:
        defs[module_fixture] = [SimpleNamespace(scope="module")]
    return SimpleNamespace(path=Path("/t") / file, name=name, _fixtureinfo=SimpleNamespace(name2fixturedefs=defs))


def test_every_long_test_named_is_a_test_of_the_suite():
    """A renamed test would silently lose its place at the head: each name is defined in its file."""
    for key in conftest.LONG_TESTS:
        file, name = key.split("::")
        assert re.search(rf"^def {re.escape(name)}\(", (TESTS / file).read_text(), re.M), key


def test_the_longest_tests_head_each_workers_share_and_the_rest_keep_their_order(monkeypatch):
    long = {"test_z.py::test_a": 100, "test_z.py::test_b": 90, "test_z.py::test_c": 50, "test_z.py::test_d": 40,
            "test_z.py::test_kept": 500}
    monkeypatch.setattr(conftest, "LONG_TESTS", long)
    short = [_item("test_a.py", f"test_{i}") for i in range(10)]
    # Collected last, as test_vm*.py are; one uses an expensive module fixture and stays in place.
    late = [_item("test_z.py", n) for n in ("test_a", "test_b", "test_c", "test_d")]
    kept = _item("test_z.py", "test_kept", module_fixture="guest")
    items = short + late + [kept]
    conftest._longest_first(_Config(3), items)
    assert sorted(map(id, items)) == sorted(map(id, short + late + [kept]))
    # worksteal's shares of 15: 5, 5, 5; the heads: a (100) | b (90) | c, d (50 + 40)
    shares = [items[0:5], items[5:10], items[10:15]]
    assert [[i.name for i in s if i.path.name == "test_z.py"] for s in shares] == \
        [["test_a"], ["test_b"], ["test_c", "test_d", "test_kept"]]
    assert [s[0].name for s in shares] == ["test_a", "test_b", "test_c"] and shares[2][1].name == "test_d"
    assert [i for i in items if i.path.name == "test_a.py"] == short      # the rest in collected order
    assert items[-1] is kept


def test_the_controller_tells_each_worker_the_runs_dist():
    node = SimpleNamespace(workerinput={"workerid": "gw0"},
                           config=SimpleNamespace(getoption=lambda name: "worksteal" if name == "dist" else None))
    conftest.pytest_configure_node(node)
    assert node.workerinput["perflab_dist"] == "worksteal"


def test_without_worksteal_nothing_moves():
    items = [_item("test_a.py", "test_0"),
             _item("test_robot.py", "test_robot_finds_bisects_and_reports_a_planted_regression_once")]
    for config in (_Config(None), _Config(3, dist="load"), _Config(1)):
        before = list(items)
        conftest._longest_first(config, items)
        assert items == before


def test_the_tests_that_mostly_wait_head_the_workers_beyond_the_cores_one_after_the_other(monkeypatch):
    long = {"test_z.py::test_w1": 30, "test_z.py::test_b1": 25, "test_z.py::test_w2": 20, "test_z.py::test_b2": 15,
            "test_z.py::test_b3": 10, "test_z.py::test_w3": 5}
    monkeypatch.setattr(conftest, "LONG_TESTS", long)
    monkeypatch.setattr(conftest, "WAITING_TESTS", {"test_z.py::test_w1", "test_z.py::test_w2", "test_z.py::test_w3"})
    monkeypatch.setattr(conftest.os, "cpu_count", lambda: 2)
    short = [_item("test_a.py", f"test_{i}") for i in range(12)]
    items = short + [_item("test_z.py", key.split("::")[1]) for key in long]
    conftest._longest_first(_Config(3), items)
    shares = [items[0:6], items[6:12], items[12:18]]
    # 3 workers on 2 cores: one lane waits (longest first), the two others compute, so that no two
    # of the waiting tests run at once and the cores are not left idle
    assert [[i.name for i in s if i.path.name == "test_z.py"] for s in shares] == \
        [["test_w1", "test_w2", "test_w3"], ["test_b1"], ["test_b2", "test_b3"]]
    assert [i for i in items if i.path.name == "test_a.py"] == short
    # as many workers as cores: still one lane; with more workers than cores, as many lanes as beyond them
    monkeypatch.setattr(conftest.os, "cpu_count", lambda: 1)
    items = short + [_item("test_z.py", key.split("::")[1]) for key in long]
    conftest._longest_first(_Config(3), items)
    shares = [items[0:6], items[6:12], items[12:18]]
    assert [[i.name for i in s if i.path.name == "test_z.py"] for s in shares] == \
        [["test_w1"], ["test_w2", "test_w3"], ["test_b1", "test_b2", "test_b3"]]
