"""Number formatting shared by the text layouts (units and widths, no statistics)."""

from __future__ import annotations

import math


def value(v: float | None) -> str:
    """LKP's way: integers for big values, up to 4 significant digits below."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if v == 0:
        return "0.00"
    a = abs(v)
    if a >= 1000:
        return f"{v:.0f}"
    if a >= 100:
        return f"{v:.1f}"
    if a >= 0.01:
        return f"{v:.2f}"
    return f"{v:.3g}"


def percent(fraction: float | None, signed: bool = True) -> str:
    if fraction is None or math.isnan(fraction):
        return "-"
    return f"{fraction * 100:+.1f}%" if signed else f"{fraction * 100:.1f}%"


def ci_percent(ci: tuple[float, float] | None) -> str:
    if ci is None or any(math.isnan(x) or math.isinf(x) for x in ci):
        return "[-, -]"
    return f"[{ci[0] * 100:+.1f}%, {ci[1] * 100:+.1f}%]"


def with_unit(v: float | None, unit: str) -> str:
    """benchstat-style scaled values: 1.234µ, 12.3Ki ... for seconds and bytes."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if unit == "s":
        for scale, suffix in ((1, ""), (1e-3, "m"), (1e-6, "µ"), (1e-9, "n")):
            if abs(v) >= scale or scale == 1e-9:
                return f"{v / scale:.4g}{suffix}"
    return f"{v:.4g}"
