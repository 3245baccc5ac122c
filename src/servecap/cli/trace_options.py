"""``--trace FILE`` and its format, window and time-scale flags (simulate, capacity, fleet simulate)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from servecap.cli.numbers import FINITE
from servecap.cli.options import stack

F = TypeVar("F", bound=Callable[..., Any])

trace_options: Callable[[F], F] = stack(
    click.option(
        "--trace",
        "trace",
        default=None,
        metavar="FILE",
        help="Replay a trace: servecap CSV/JSONL, Mooncake/Bailian block-hash JSONL, Azure LLM inference CSV, "
        "BurstGPT CSV, GitHub Copilot agent-trace JSONL (Azure 2026), a sessions JSONL (parent/child edges, "
        "tool gaps), or a shipped sample:<name> (mooncake-conversation, azure-code-2023, agentic, servecap).",
    ),
    click.option(
        "--trace-format",
        type=click.Choice(["auto", "servecap", "mooncake", "azure", "burstgpt", "sessions", "copilot"]),
        default="auto",
        show_default=True,
        help="The trace's format (auto: from the CSV header or the first JSON line).",
    ),
    click.option(
        "--time-scale", type=FINITE, default=None, help="Multiply the trace's times (2: half the rate; 0.5: double)."
    ),
    click.option("--trace-start-s", type=FINITE, default=None, help="Keep the trace from this second of its clock."),
    click.option("--trace-end-s", type=FINITE, default=None, help="Keep the trace before this second of its clock."),
    click.option(
        "--trace-block-tokens",
        type=int,
        default=None,
        help="Tokens per hash_ids entry of a block-hash trace (default 512, Mooncake's).",
    ),
)


def pop_trace(settings: dict[str, object]) -> Any:
    """The :class:`~servecap.workload.spec.TraceArrival` the trace flags in ``settings`` name (they
    are removed from it), or None."""
    from servecap.app.trace_flags import trace_from_flags

    return trace_from_flags(
        settings.pop("trace"),  # type: ignore[arg-type]
        trace_format=settings.pop("trace_format"),  # type: ignore[arg-type]
        time_scale=settings.pop("time_scale"),  # type: ignore[arg-type]
        trace_start_s=settings.pop("trace_start_s"),  # type: ignore[arg-type]
        trace_end_s=settings.pop("trace_end_s"),  # type: ignore[arg-type]
        trace_block_tokens=settings.pop("trace_block_tokens"),  # type: ignore[arg-type]
    )
