"""Helpers shared by the measure tests: request specs and the known delays."""

from __future__ import annotations

from servecap.workload import RequestSpec as Req

TTFT_S = 0.040
ITL_S = 0.010


def reqs(n: int, rate: float, prompt: int = 64, output: int = 8) -> list[Req]:
    return [Req(i, i / rate, prompt, output) for i in range(n)]
