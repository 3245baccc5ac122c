"""Hostile values for the parallelism and speculative-decoding flags and fields (issue 30): each
ends in one line naming it, exit 1 or 2, within seconds, in the CLI and the HTTP API alike;
hypothesis draws any integer or text for each."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from hostile_cases import is_one_line_naming_a_field, run_in_process
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from servecap.api import ServeSettings, create_app

LIMIT_S = 10.0
BASE = ("plan", "-m", "deepseek-v3", "-g", "H200", "--tp", "1", "--dp", "8", "--ep", "8", "-w", "fp8")
HOSTILE = ("0", "-1", "nan", "inf", "1e-300", "1e300", "99999999999999999999", "x", "")

# (flag, its values that must be refused); the base layout is DP 8 + EP 8 of DeepSeek-V3 on H200
CASES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("--dp", HOSTILE),
    ("--ep", HOSTILE),
    ("--nodes", (*HOSTILE, "3")),
    ("--gpus-per-node", (*HOSTILE, "3", "100")),
    ("--redundant-experts", ("-1", "nan", "1e300", "3", "x")),
    ("--expert-skew", ("-1", "nan", "inf", "1e300", "-1e-300", "5", "x")),
    ("--a2a-mode", ("fast", "", "nan")),
    ("--num-speculative-tokens", (*HOSTILE, "17")),
)


def _refused(argv: list[str]) -> None:
    result = run_in_process(argv, limit_s=LIMIT_S)
    assert result.outcome == "error", (argv, result.outcome, result.stderr[-2000:])
    assert is_one_line_naming_a_field(result.stderr), result.stderr
    assert result.seconds < LIMIT_S


@pytest.mark.parametrize(("flag", "values"), CASES, ids=[c[0] for c in CASES])
def test_hostile_parallelism_flags_are_refused(flag: str, values: tuple[str, ...]) -> None:
    for value in values:
        _refused([*BASE, flag, (" " + value) if value.startswith("-") else value])


@pytest.mark.parametrize(
    "extra",
    [
        ("--speculative", "mtp", "--spec-acceptance", "0"),
        ("--speculative", "mtp", "--spec-acceptance", "nan"),
        ("--speculative", "mtp", "--spec-acceptance", "1e300"),
        ("--speculative", "mtp", "--spec-acceptance", "al=1e300"),
        ("--speculative", "mtp", "--spec-acceptance", "0.9,0.8"),
        ("--speculative", "warp"),
        ("--num-speculative-tokens", "3"),
        ("--spec-acceptance", "0.8"),
        ("--draft-model", "meta-llama/Llama-3.2-1B"),
        ("--speculative", "draft"),
        ("--speculative", "draft", "--draft-model", "/no/such/config.json"),
        ("--speculative", "draft", "--draft-model", "meta-llama/Llama-3.2-1B"),  # another vocabulary
        ("--speculative", "ngram"),  # fine: n-gram has a default (no refusal expected below)
    ],
)
def test_hostile_speculative_flags(extra: tuple[str, ...]) -> None:
    argv = [*BASE, *extra]
    if extra == ("--speculative", "ngram"):
        assert run_in_process(argv, limit_s=LIMIT_S).outcome == "accepted"
        return
    _refused(argv)


def test_eagle_on_a_model_without_mtp_names_speculative() -> None:
    _refused(["plan", "-m", "meta-llama/Llama-3.1-8B", "-g", "H100", "--speculative", "mtp"])


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    data = tmp_path_factory.mktemp("frontier")
    with TestClient(
        create_app(ServeSettings(data_dir=data, db=data / "runs.sqlite")), base_url="http://127.0.0.1"
    ) as c:
        yield c


API_BASE = {"model": "deepseek-v3", "gpu": "H200", "tp": 1, "dp": 8, "ep": 8, "weights_dtype": "fp8"}


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("dp", 0),
        ("dp", -1),
        ("dp", 10**9),
        ("ep", 3),
        ("ep", 0),
        ("nodes", 3),
        ("gpus_per_node", 0),
        ("redundant_experts", -1),
        ("expert_skew", -1e-300),
        ("expert_skew", 1e300),
        ("expert_skew", "nan"),
        ("a2a_mode", "fast"),
        ("two_batch_overlap", "maybe"),
        ("speculative", "warp"),
        ("num_speculative_tokens", 0),
        ("spec_acceptance", "0"),
        ("draft_model", "/etc/passwd"),
    ],
)
def test_the_api_refuses_the_same_values(client: TestClient, field: str, value: object) -> None:
    body = {**API_BASE, field: value}
    if field in ("num_speculative_tokens", "spec_acceptance"):
        body["speculative"] = "mtp"
    r = client.post("/api/v1/plan", json=body)
    assert 400 <= r.status_code < 500, (field, value, r.status_code, r.text[:300])
    err = r.json()["error"]
    assert "\n" not in err["message"]
    assert "root:x:0:0" not in r.text


def test_the_api_plans_a_wide_ep_layout(client: TestClient) -> None:
    r = client.post("/api/v1/plan", json={**API_BASE, "dp": 16, "ep": 16, "speculative": "mtp"})
    assert r.status_code == 200, r.text[:500]
    got = r.json()
    assert got["parallelism"]["nodes"] == 2
    assert got["speculative"]["method"] == "mtp"


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    flag=st.sampled_from([c[0] for c in CASES if c[0] != "--a2a-mode"]),
    value=st.one_of(st.integers(min_value=-(10**30), max_value=10**30).map(str), st.text(max_size=10)),
)
def test_any_value_of_a_frontier_flag_is_handled(flag: str, value: str) -> None:
    if value.startswith("-"):
        value = " " + value
    result = run_in_process([*BASE, flag, value], limit_s=LIMIT_S)
    assert result.outcome in ("error", "accepted"), (flag, value, result.outcome, result.stderr[-2000:])
    if result.outcome == "error":
        assert is_one_line_naming_a_field(result.stderr), result.stderr
