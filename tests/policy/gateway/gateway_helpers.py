"""A minimal request for the gateway's policies (the fields of ``GatewayRequest``)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Req:
    request_id: int
    prompt_tokens: int = 100
    output_tokens: int = 50
    priority: int = 0
    tenant: str | None = None
    request_class: str | None = None
    duplicate_group: int | None = None
    turn: int = 1
    history_tokens: int = 0
