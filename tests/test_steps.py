"""Long steps say what they do and for how long (core/steps.py; issue 47, Deliver 4).

No timing here: PERFLAB_STEP_AFTER=0 makes every step speak, a large one none."""

from __future__ import annotations

import io

import pytest

from perflab.core import steps
from perflab.core.steps import seconds_text, step


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_off_a_terminal_a_step_is_a_start_line_and_an_end_line_with_its_duration(monkeypatch, capsys):
    monkeypatch.setenv("PERFLAB_STEP_AFTER", "0")
    with step("building 6.1.192 (make bzImage)"):
        with step("waiting for the build of /src by pid 7"):
            pass
    with pytest.raises(RuntimeError):
        with step("booting bzImage (tcg)"):
            raise RuntimeError("no")
    out, err = capsys.readouterr()
    assert out == ""
    lines = err.splitlines()
    assert lines[0] == "building 6.1.192 (make bzImage) ..."
    assert lines[1] == "waiting for the build of /src by pid 7 ..."
    assert lines[2].startswith("waiting for the build of /src by pid 7: done in ") and lines[2].endswith(" s")
    assert lines[3].startswith("building 6.1.192 (make bzImage): done in ")
    assert lines[4] == "booting bzImage (tcg) ..."
    assert lines[5].startswith("booting bzImage (tcg): failed after ")
    assert len(lines) == 6


def test_a_step_shorter_than_the_threshold_says_nothing(monkeypatch, capsys):
    monkeypatch.setenv("PERFLAB_STEP_AFTER", "3600")
    with step("checking out 1a2b3c in /tmp/x"):
        pass
    assert capsys.readouterr() == ("", "")
    assert steps.current() == ""


def test_on_a_terminal_a_step_is_a_ticking_line_then_one_line_that_stays(monkeypatch):
    monkeypatch.setenv("PERFLAB_STEP_AFTER", "0")
    term = Terminal()
    monkeypatch.setattr("sys.stderr", term)
    with step("series: counting base and head"):
        with step("kernel 1a2b3c4d5e6f: make bzImage"):
            assert steps.current().startswith("kernel 1a2b3c4d5e6f: make bzImage ")
            steps.say("a line of progress")
    text = term.getvalue()
    # The ticking line is redrawn in place: the outer step, then the inner with its elapsed seconds.
    assert "\r\x1b[Kseries: counting base and head › kernel 1a2b3c4d5e6f: make bzImage  " in text
    # A progress line clears it first, and the ended step stays as one line with its duration.
    assert "\r\x1b[Ka line of progress\n" in text
    finals = [line.rsplit("\r\x1b[K", 1)[-1] for line in text.split("\n") if ": done in " in line]
    assert [f.split(": done in ")[0] for f in finals] == ["kernel 1a2b3c4d5e6f: make bzImage",
                                                          "series: counting base and head"]
    assert text.endswith("\n")      # nothing left drawn


def test_under_the_runners_live_bar_a_step_draws_no_line_of_its_own(monkeypatch):
    monkeypatch.setenv("PERFLAB_STEP_AFTER", "0")
    term = Terminal()
    monkeypatch.setattr("sys.stderr", term)
    steps.hold(True)
    try:
        with step("booting bzImage (icount)"):
            assert steps.current().startswith("booting bzImage (icount) ")   # what the bar shows
    finally:
        steps.hold(False)
    assert term.getvalue() == ""


def test_durations_read_as_a_person_says_them():
    assert seconds_text(4.25) == "4.2 s"
    assert seconds_text(37.4) == "37 s"
    assert seconds_text(516) == "8 min 36 s"
    assert seconds_text(3725) == "1 h 02 min"


def test_a_bad_threshold_is_the_default():
    for raw in ("soon", "-1", "nan", "inf"):
        with pytest.MonkeyPatch.context() as m:
            m.setenv("PERFLAB_STEP_AFTER", raw)
            assert steps.after_s() == steps.STEP_AFTER_S


def test_a_stdout_line_clears_the_ticking_line_first(monkeypatch, capsys):
    # The robot's log goes to stdout: on the same terminal, a line written under a drawn ticking
    # line would land on the end of it.
    monkeypatch.setenv("PERFLAB_STEP_AFTER", "0")
    term = Terminal()
    monkeypatch.setattr("sys.stderr", term)
    with step("1a2b3c4d5e6f: building and measuring"):
        drawn = term.getvalue()
        steps.say("robot: 1a2b3c4d5e6f: measured (3 runs)", stdout=True)
        assert term.getvalue().startswith(drawn + "\r\x1b[K")
    assert capsys.readouterr().out == "robot: 1a2b3c4d5e6f: measured (3 runs)\n"
