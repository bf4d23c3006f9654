"""Hostile job files (issue 23: M1, M2, L1, L3, L12) and the sweep of bad values in every job key."""

from __future__ import annotations

import typing

import pytest
import yaml

from conftest import assert_one_line_error
from perflab import benchmarks, jobs
from perflab.core.errors import PerflabError
from perflab.core.params import parse_scalar


def _load(tmp_path, text: str, *overrides: str, name: str = "job.yaml"):
    path = tmp_path / name
    path.write_text(text)
    return jobs.load_atomic(path, list(overrides))


def _error(tmp_path, text: str, *overrides: str) -> str:
    with pytest.raises(PerflabError) as info:
        _load(tmp_path, text, *overrides)
    message = str(info.value)
    # Every problem of a job is reported, each on its own line at its own place (issue 22); each
    # line is one short, complete message (a family's valid values may be listed).
    lines = message.split("\n")
    assert all(0 < len(line) < 800 for line in lines), message
    return message


# -- M1: the matrix is counted before it is expanded --------------------------------

def _axis(n: int) -> str:
    return "[" + ", ".join(str(i) for i in range(1, n + 1)) + "]"


def test_a_matrix_over_the_limit_is_refused_with_the_product_of_its_axes(tmp_path, monkeypatch):
    monkeypatch.delenv("PERFLAB_MATRIX_LIMIT", raising=False)
    text = f"benchmark: hackbench\nloops: {_axis(1000)}\ngroups: {_axis(1000)}\n"
    message = _error(tmp_path, text)
    assert "loops 1000 x groups 1000 = 1,000,000" in message and "PERFLAB_MATRIX_LIMIT" in message
    # The limit is overridable both ways.
    monkeypatch.setenv("PERFLAB_MATRIX_LIMIT", "5")
    assert "groups 6 = 6" in _error(tmp_path, f"benchmark: hackbench\ngroups: {_axis(6)}\n")
    assert len(_load(tmp_path, f"benchmark: hackbench\ngroups: {_axis(5)}\n")) == 5
    monkeypatch.setenv("PERFLAB_MATRIX_LIMIT", "lots")
    assert "PERFLAB_MATRIX_LIMIT" in _error(tmp_path, "benchmark: hackbench\n")


def test_jobs_split_and_run_refuse_a_huge_matrix_before_writing_anything(cli, tmp_path):
    job = tmp_path / "big.yaml"
    job.write_text(f"benchmark: hackbench\nloops: {_axis(1000)}\ngroups: {_axis(1000)}\n")
    out = tmp_path / "split"
    assert_one_line_error(cli("jobs", "split", job, "-o", out, check=False), "1,000,000", "limit")
    assert not out.exists()
    assert_one_line_error(cli("run", job, check=False), "1,000,000")


# -- M2, L1: aliases, and tag/comment are strings ------------------------------------

def test_yaml_aliases_are_refused_at_their_line(tmp_path):
    bomb = "benchmark: cmd\nargv: [true]\na: &a [1, 1, 1, 1, 1, 1, 1, 1]\n"
    bomb += "".join(f"{c}: &{c} [{', '.join([f'*{p}'] * 8)}]\n" for p, c in zip("abcdefg", "bcdefgh"))
    message = _error(tmp_path, bomb)
    assert "job.yaml:4" in message and "alias" in message


@pytest.mark.parametrize("key", ["tag", "comment"])
def test_tag_and_comment_must_be_strings(tmp_path, key):
    assert f"key {key!r}" in _error(tmp_path, f"benchmark: cmd\nargv: [true]\n{key}: [a, b]\n")
    assert f"key {key!r}" in _error(tmp_path, "benchmark: cmd\nargv: [true]\n", f"{key}=[[1], [2]]")
    assert f"key {key!r}" in _error(tmp_path, "benchmark: cmd\nargv: [true]\n", f"{key}={{a: 1}}")
    # An alias in --set is not followed: the text is kept as it was typed.
    (job,) = _load(tmp_path, "benchmark: cmd\nargv: [true]\n", f"{key}=&a [*a, *a]")
    assert getattr(job, key) == "&a [*a, *a]"
    (job,) = _load(tmp_path, f"benchmark: cmd\nargv: [true]\n{key}: 2024\n")
    assert getattr(job, key) == "2024"


def test_parse_scalar_follows_no_alias():
    assert parse_scalar("&a [*a, *a]") == "&a [*a, *a]"
    assert parse_scalar("[1, 2]") == [1, 2]


# -- L3: a duplicate key -------------------------------------------------------------

def test_a_duplicate_key_is_an_error_at_its_line(tmp_path):
    message = _error(tmp_path, "benchmark: cmd\nruns: 1\nargv: [true]\nruns: 2\n")
    assert "job.yaml:4" in message and "duplicate key 'runs'" in message and "line 2" in message
    nested = _error(tmp_path, "benchmark: hackbench\nhackbench:\n  loops: 1\n  loops: 2\n")
    assert "job.yaml:4" in nested and "'loops'" in nested


# -- L12: long values are abbreviated -----------------------------------------------

def test_a_long_value_in_an_error_is_abbreviated(tmp_path):
    message = _error(tmp_path, f"benchmark: hackbench\nruns: {_axis(100)}\n")
    # (the file's path goes first: pytest's numbered temporary directory may hold "50")
    message = message.split("job.yaml:", 1)[1]
    assert "[1, 2, 3, …, 100] (100 items)" in message and "50" not in message
    message = _error(tmp_path, f"benchmark: hackbench\nmode: {'x' * 5000}\n")
    assert len(message) < 400 and "…(+" in message


# -- the sweep: a wrong-typed and an out-of-range value in every key -----------------

BASE = {"cmd": {"argv": ["true"]}}


def _numeric(annotation) -> bool:
    args = typing.get_args(annotation) or (annotation,)
    return any(a in (int, float) for a in args) and not any(a is str for a in args)


def _cases():
    for key in ("runs", "warmup", "timeout", "tag", "comment", "monitors", "kernel", "vm"):
        yield pytest.param("cmd", key, {"bad": [1]}, id=f"job-{key}-type")
    for key in ("runs", "warmup", "timeout"):
        yield pytest.param("cmd", key, -5, id=f"job-{key}-range")
    for family in benchmarks.FAMILIES:
        for key, field in benchmarks.family(family).Params.model_fields.items():
            yield pytest.param(family, key, {"bad": [1]}, id=f"{family}-{key}-type")
            if _numeric(field.annotation):
                yield pytest.param(family, key, -10 ** 12, id=f"{family}-{key}-range")


@pytest.mark.parametrize("family, key, value", list(_cases()))
def test_a_bad_value_in_any_key_is_one_line_naming_the_key(tmp_path, family, key, value):
    doc = {"benchmark": family, **BASE.get(family, {}), key: value}
    message = _error(tmp_path, yaml.safe_dump(doc))
    assert key in message, message
    assert "Traceback" not in message
