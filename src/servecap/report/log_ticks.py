"""Tick labels for a log axis: 1-2-5 per decade while they fit, else fewer decades.

Plotly labels a log axis's minor ticks (2, 3, ... 9 per decade) with the digit alone, and over
a few decades they overlap. The web pages and the HTML reports place their ticks by the same
rule (``logTicks`` in ``web/static/servecap.js`` is this function's twin, its cases pinned by
the same test values): the first that gives at most ``most`` ticks of

    1-2-5 in every decade; 1 in every decade; 1 every 2, 3, 5, 10 decades

between ``min / 1.5`` and ``max * 1.5`` of the positive finite values, labelled with
thousands separators and as many decimals as a tick below 1 needs. Fewer than two ticks, or
none that fit: plotly's own (an empty dict).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

_STEPS: tuple[tuple[tuple[int, ...], int], ...] = (
    ((1, 2, 5), 1),
    ((1,), 1),
    ((1,), 2),
    ((1,), 3),
    ((1,), 5),
    ((1,), 10),
)


def _label(tick: float) -> str:
    digits = max(0, -math.floor(math.log10(tick) + 1e-9))
    return f"{tick:,.{digits}f}"


def log_ticks(values: Iterable[float | None], most: int = 8) -> dict[str, Any]:
    """Plotly axis settings (``tickmode``, ``tickvals``, ``ticktext``) for a log axis over
    ``values``; ``{}`` where plotly's own ticks are left."""
    v = [float(x) for x in values if x is not None and math.isfinite(x) and x > 0]
    if not v:
        return {}
    lo, hi = min(v), max(v)
    d0, d1 = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    for mantissas, every in _STEPS:
        ticks = [
            m * 10.0**d
            for d in range(d0, d1 + 1)
            if (d - d0) % every == 0
            for m in mantissas
            if lo / 1.5 <= m * 10.0**d <= hi * 1.5
        ]
        if len(ticks) <= most:
            if len(ticks) < 2:
                return {}
            return {"tickmode": "array", "tickvals": ticks, "ticktext": [_label(t) for t in ticks]}
    return {}
