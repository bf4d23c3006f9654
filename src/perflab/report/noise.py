"""`perflab noise` as text: one table per A/A, one line per metric, then the runs each needs.

The figures were computed before (analysis.noise, stats.noise); this only lays them out.
"""

from __future__ import annotations

import math

from perflab.analysis.noise import NoiseReport
from perflab.core.text import printable
from perflab.report.numbers import percent, with_unit
from perflab.stats.noise import MOST_RUNS, RUNS_PER_SIDE

HEADER = ("metric", "mean", "CoV", "lag-1", "stretches", "modes", "A/A")


def _cell_change(fraction: float) -> str:
    if math.isnan(fraction):
        return "-"
    if fraction == 0:
        return "exact"
    if not math.isfinite(fraction):
        return "-"
    return percent(fraction, signed=False)


def _lag(m) -> str:
    if not math.isfinite(m.serial_correlation):
        return "-"
    return f"{m.serial_correlation:+.2f}" + ("*" if m.correlated else "")


def _stretches(m) -> str:
    if m.shifts == 0:
        return "no"
    return f"yes: {m.shifts} ({percent(m.shift_size, signed=False)})"


def _modes(m) -> str:
    return f"2 ({percent(m.modes_apart)})" if m.bimodal else "1"


def _row(m) -> list[str]:
    cov = "0" if m.exact or m.cov == 0 else percent(m.cov, signed=False, decimals=2 if m.cov < 0.01 else 1)
    return [printable(m.metric, 60), _mean(m.mean, m.unit), cov, _lag(m), _stretches(m), _modes(m),
            percent(m.aa_change),
            *(_cell_change(d) for _, d in m.detectable)]


def _table(rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    out = []
    for r in rows:
        cells = [r[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(r[1:], widths[1:])]
        out.append("  ".join(cells).rstrip())
    return out


def _needs(report: NoiseReport) -> str:
    parts = []
    for m in report.metrics:
        need = report.needs.get(m.metric)
        words = "-" if not m.mean else f">{MOST_RUNS}" if need is None else str(need)
        parts.append(f"{printable(m.metric, 60)} {words}")
    return f"for a {report.change * 100:g}% change, runs per side needed at 90% power: " + ", ".join(parts)


def _mean(v: float, unit: str) -> str:
    if unit == "s":
        return with_unit(v, unit) + "s"
    return f"{with_unit(v, unit)} {printable(unit, 20)}".rstrip()


def render(reports: list[NoiseReport]) -> str:
    """The A/A tables and the runs each metric needs for the change asked about."""
    out = []
    for report in reports:
        out.append(f"noise: A/A of {printable(report.name, 80)}: runs #{report.run_a} (A) and #{report.run_b} (B), "
                   f"tag {report.tag}, {report.rounds} rounds, order randomised within each round")
        sides = " / ".join(str(n) for n in RUNS_PER_SIDE)
        out.append(f"smallest change detectable at 90% power (alpha 0.05) with {sides} runs per side in the last columns")
        header = [*HEADER, *(f"n={n}" for n in RUNS_PER_SIDE)]
        out.extend(_table([header, *(_row(m) for m in report.metrics)]))
        out.append(_needs(report))
        moving = [m.metric for m in report.metrics if m.stretches or m.bimodal]
        if moving:
            out.append(f"warning: the level moves in stretches or between two speeds for "
                       f"{', '.join(printable(m, 60) for m in moving)}: "
                       f"the figures above hold only for A/B runs interleaved round by round (docs/noise.md)")
        correlated = [m.metric for m in report.metrics if m.correlated]
        if correlated:
            out.append(f"note: runs follow the one before (lag-1 marked *) for {', '.join(printable(m, 60) for m in correlated)}: "
                       f"detectable changes are widened by (1+rho)/(1-rho)")
        out.append("")
    return "\n".join(out)
