"""``fleet_cache_replay_refusal`` (app/cache_replay.py): the cache replay's refusal as a value,
before any request is replayed, the very error the replay raises; None for what it runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from servecap.app.cache_replay import NO_TRACE, NOT_READ, fleet_cache_replay, fleet_cache_replay_refusal
from servecap.app.flags import DeploymentFlags
from servecap.app.fleet_flags import FleetFlags, fleet_from_flags
from servecap.errors import ServecapError
from servecap.fleet.file_schema import FleetFile
from servecap.workload.spec_parts import TraceArrival

SAMPLE = TraceArrival(path="sample:mooncake-conversation")


def _fleet(**kw: object) -> FleetFile:
    deployment = DeploymentFlags(model="meta-llama/Llama-3.1-8B", gpu="H100")
    ff, _ = fleet_from_flags(FleetFlags(deployment=deployment, **kw))  # type: ignore[arg-type]
    return ff


def test_a_replay_it_runs_has_no_refusal() -> None:
    assert fleet_cache_replay_refusal(_fleet(replicas=2), SAMPLE) is None
    assert fleet_cache_replay_refusal(_fleet(), SAMPLE, unread={"--rate": None, "--users": None}) is None


def test_load_settings_and_no_trace_come_first() -> None:
    err = fleet_cache_replay_refusal(_fleet(), SAMPLE, unread={"--rate": None, "--num-requests": 5})
    assert err is not None and (err.field, err.value, err.problem) == ("--num-requests", 5, NOT_READ)
    err = fleet_cache_replay_refusal(_fleet(), None)
    assert err is not None and (err.field, err.problem) == ("--fidelity", NO_TRACE)


@pytest.mark.parametrize(
    ("trace", "field", "words"),
    [
        (TraceArrival(path=SAMPLE.path, format="servecap"), "--trace-format", "mooncake"),
        (TraceArrival(path=SAMPLE.path, start_s=3.0), "--trace-start-s", "window"),
        (TraceArrival(path="sample:azure-code-2023"), "trace", "mooncake JSONL"),  # read at its first chunk
        (TraceArrival(path="sample:nope"), "--trace", "no such sample"),
    ],
)
def test_each_refusal_is_the_error_the_replay_raises(trace: TraceArrival, field: str, words: str) -> None:
    err = fleet_cache_replay_refusal(_fleet(), trace)
    assert err is not None and err.field == field and words in err.problem, err
    with pytest.raises(ServecapError) as raised:
        fleet_cache_replay(_fleet(), trace)
    assert str(raised.value) == str(err)


def test_a_fleet_it_does_not_model_and_a_missing_file(tmp_path: Path) -> None:
    err = fleet_cache_replay_refusal(_fleet(router="session"), SAMPLE)
    assert err is not None and err.field == "--fidelity" and "router 'session'" in err.problem
    missing = TraceArrival(path=str(tmp_path / "missing.jsonl"))
    err = fleet_cache_replay_refusal(_fleet(), missing)
    assert err is not None and "cannot be read" in err.problem
