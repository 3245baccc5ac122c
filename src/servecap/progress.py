"""One progress event type for every long-running use case.

It lives in the base layer so engines can report it. The CLI renders it as a rich progress bar on a terminal (a line every few seconds to stderr
otherwise); the HTTP API sends it as a server-sent event. Library code takes an optional
``ProgressFn`` and calls it now and then; it never prints.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Progress:
    """``done`` of ``total`` units of ``stage`` (``total`` is None when unknown).

    ``unit`` names what is counted (``"requests"``, ``"simulations"``, ``"rows"``);
    ``message`` is an optional one-line note for a person; ``sim_time_s`` is where a
    simulation's clock stands (the last arrival or finish), None for work without one.
    """

    stage: str
    done: int
    total: int | None = None
    unit: str = "requests"
    message: str = ""
    sim_time_s: float | None = None

    @property
    def fraction(self) -> float | None:
        if not self.total:
            return None
        return min(1.0, self.done / self.total)


ProgressFn = Callable[[Progress], None]
