"""Click types for numeric flags: a float flag takes finite numbers only.

``click.FLOAT`` accepts ``nan`` and ``inf`` (Python's ``float()`` does), and ``nan`` passes
every range check (every comparison with it is false), so a NaN think time ran as 0 and a NaN
TTFT hung the emulator. :data:`FINITE` refuses them by the flag's name as one
:class:`~servecap.errors.ServecapError` line; :class:`FiniteRange` adds bounds.
"""

from __future__ import annotations

import math
from typing import Any

import click

from servecap.errors import ServecapError


def _flag(param: click.Parameter | None) -> str:
    if param is None:
        return "value"
    opts = getattr(param, "opts", None) or []
    return str(opts[0]) if opts else str(param.name)


class FiniteFloat(click.ParamType):  # type: ignore[type-arg]  # generic only from click 8.2
    """A float flag refusing NaN and infinity (and, with ``min``/``max``, values outside them)."""

    name = "float"

    def __init__(self, min: float | None = None, max: float | None = None, *, min_open: bool = False) -> None:
        self.min = min
        self.max = max
        self.min_open = min_open

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        if isinstance(value, float | int) and not isinstance(value, bool):
            number = float(value)
        else:
            try:
                number = float(str(value).strip())
            except ValueError:
                raise ServecapError(_flag(param), value, "must be a number") from None
        if not math.isfinite(number):
            raise ServecapError(_flag(param), value, "must be a finite number (not NaN or infinity)")
        if self.min is not None and (number < self.min or (self.min_open and number == self.min)):
            raise ServecapError(_flag(param), value, f"must be {'>' if self.min_open else '>='} {self.min:g}")
        if self.max is not None and number > self.max:
            raise ServecapError(_flag(param), value, f"must be <= {self.max:g}")
        return number

    def __repr__(self) -> str:
        return "FiniteFloat"


FINITE = FiniteFloat()


def FiniteRange(min: float | None = None, max: float | None = None) -> FiniteFloat:
    """``click.FloatRange(min, max)`` that also refuses NaN and infinity."""
    return FiniteFloat(min, max)
