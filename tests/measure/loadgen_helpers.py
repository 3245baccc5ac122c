"""Helpers shared by the measure tests: request specs and the known delays."""

from __future__ import annotations

from dataclasses import dataclass

TTFT_S = 0.040
ITL_S = 0.010


@dataclass(frozen=True)
class Req:
    request_id: int
    arrival_s: float
    prompt_tokens: int
    output_tokens: int
    prefix_group: int | None = None
    prefix_tokens: int = 0


def reqs(n: int, rate: float, prompt: int = 64, output: int = 8) -> list[Req]:
    return [Req(i, i / rate, prompt, output) for i in range(n)]
