"""What a gateway policy reads of a request: a narrower view of the one arriving shape
(``servecap.sim.server.ArrivingRequest``; ``servecap.workload.RequestSpec`` has all of it)."""

from __future__ import annotations

from typing import Protocol


class GatewayRequest(Protocol):
    """The read-only fields the gateway's policies use."""

    @property
    def request_id(self) -> int: ...

    @property
    def prompt_tokens(self) -> int: ...

    @property
    def output_tokens(self) -> int: ...

    @property
    def priority(self) -> int:
        """Lower is served first."""
        ...

    @property
    def tenant(self) -> str | None: ...

    @property
    def request_class(self) -> str | None: ...

    @property
    def duplicate_group(self) -> int | None:
        """Requests with the same id are exact repeats (None: unique)."""
        ...

    @property
    def turn(self) -> int:
        """1-based turn within a conversation (1: a fresh question)."""
        ...

    @property
    def history_tokens(self) -> int:
        """Tokens of earlier turns the prompt carries (0: none)."""
        ...
