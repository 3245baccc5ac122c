"""Trace samples shipped with servecap, named ``sample:<name>`` wherever a trace path is taken
(the CLI's ``--trace``, a workload file's ``arrival.path``, and the HTTP API, which reads no
other file). Their sources and licences: ``workload/data/TRACES.md``."""

from __future__ import annotations

from pathlib import Path

from servecap.errors import ServecapError, did_you_mean

PREFIX = "sample:"
DATA = Path(__file__).parent / "data"
SAMPLES: dict[str, str] = {
    "mooncake-conversation": "mooncake_conversation_head.jsonl",
    "azure-code-2023": "azure_code_2023_head.csv",
    "agentic": "agentic_sessions.jsonl",
    "servecap": "sample_trace.jsonl",
    "copilot-agent": "copilot_agent_sample.jsonl",
}


def is_sample(path: str) -> bool:
    return path.startswith(PREFIX)


def trace_path(path: str, field: str = "workload.arrival.path") -> Path:
    """The file a trace path names: a shipped sample's, or the path itself."""
    if not is_sample(path):
        return Path(path)
    name = path[len(PREFIX) :]
    if name not in SAMPLES:
        raise ServecapError(
            field, path, "no such sample" + did_you_mean(name, SAMPLES) + f"; one of {', '.join(SAMPLES)}"
        )
    return DATA / SAMPLES[name]
