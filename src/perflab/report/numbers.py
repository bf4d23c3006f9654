"""Number formatting shared by the text layouts (units and widths, no statistics)."""

from __future__ import annotations

import math

SIGNIFICANT = 4  # digits every layout shows of a value, at least


def value(v: float | None) -> str:
    """LKP's way: integers from 1000 up, else 4 significant digits in fixed
    notation (0.01500, 5.000, 12.35, 123.4); below 1e-4 in scientific notation."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    if v == 0:
        return "0"
    a = abs(v)
    if a >= 10 ** (SIGNIFICANT - 1):
        return f"{v:.0f}"
    if a >= 1e-4:
        decimals = SIGNIFICANT - 1 - math.floor(math.log10(a))
        text = f"{v:.{decimals}f}"
        return f"{v:.0f}" if abs(float(text)) >= 10 ** (SIGNIFICANT - 1) else text  # 999.96 -> 1000
    return f"{v:.{SIGNIFICANT - 1}e}"


def percent(fraction: float | None, signed: bool = True, decimals: int = 1) -> str:
    """A fraction as a percentage; a change that rounds to zero is "0.0%", never "-0.0%"."""
    if fraction is None or math.isnan(fraction):
        return "-"
    x = fraction * 100
    if round(x, decimals) == 0:
        return f"{0:.{decimals}f}%"
    return f"{x:+.{decimals}f}%" if signed else f"{x:.{decimals}f}%"


def ci_percent(ci: tuple[float, float] | None, decimals: int = 1) -> str:
    if ci is None or any(math.isnan(x) or math.isinf(x) for x in ci):
        return "[-, -]"
    return f"[{percent(ci[0], decimals=decimals)}, {percent(ci[1], decimals=decimals)}]"


def with_unit(v: float | None, unit: str) -> str:
    """benchstat-style scaled values, 4 significant digits: 1.234µ, 11.25m for seconds."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if v == 0:
        return "0"
    if unit == "s":
        for scale, suffix in ((1, ""), (1e-3, "m"), (1e-6, "µ"), (1e-9, "n")):
            if abs(v) >= scale or scale == 1e-9:
                return f"{value(v / scale)}{suffix}"
    return value(v)
