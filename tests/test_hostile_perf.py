"""Issue 23 L7: perf refused by the kernel's access control names the sysctl and the capability.

Real perf, real kernel refusal: perflab runs as root with every capability dropped
(setpriv --bounding-set=-all), which is what root in a container looks like to
perf_event_open; with perf_event_paranoid above 0 perf may not count system-wide."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import PERFLAB
from perflab.monitors.base import Unavailable
from perflab.monitors.perf import check_permission


def _paranoid() -> int:
    return int(Path("/proc/sys/kernel/perf_event_paranoid").read_text().split()[0])


needs_setup = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv") or not shutil.which("perf"),
                                 reason="needs root (to drop capabilities with setpriv) and perf")
NEEDLES = ("perf_event_paranoid is", "sysctl -w kernel.perf_event_paranoid=0", "CAP_PERFMON")


@needs_setup
@pytest.mark.parametrize("monitor", ["perf-stat", "perf-profile"])
def test_perf_refused_by_paranoid_names_sysctl_and_capability(cli, tmp_path, monitor):
    if _paranoid() <= 0:
        # This kernel lets every user count system-wide: nothing refuses, so the message is
        # checked as a user without the capabilities would get it.
        setting = tmp_path / "perf_event_paranoid"
        setting.write_text("2\n")
        with pytest.raises(Unavailable) as refused:
            check_permission(False, str(setting), privileged=False)
        assert all(n in str(refused.value) for n in NEEDLES) and "install" not in str(refused.value)
        return
    proc = subprocess.run(["setpriv", "--bounding-set=-all", "--inh-caps=-all", PERFLAB, "run", "cmd", "--runs", "1",
                           "--monitor", monitor, "--", "true"],
                          capture_output=True, text=True, env=cli.env, cwd=cli.tmp, timeout=120)
    assert proc.returncode == 0, proc.stderr   # the run goes on without the monitor, warned
    warning = [l for l in proc.stderr.splitlines() if l.startswith(f"warning: monitor {monitor} not run")]
    assert len(warning) == 1, proc.stderr
    line = warning[0]
    for needle in (*NEEDLES, "root without CAP_PERFMON"):
        assert needle in line, (needle, line)
    assert "install" not in line
