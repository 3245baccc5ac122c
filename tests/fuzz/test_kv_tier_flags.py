"""Hostile values for the KV-tier flags and fields (issue 31): each ends in one line naming it,
exit 1 or 2, within seconds, in the CLI (simulate, fleet simulate, a fleet file's pool) and the
HTTP API alike."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from fastapi.testclient import TestClient
from hostile_cases import is_one_line_naming_a_field, run_in_process

from servecap.api import ServeSettings, create_app

LIMIT_S = 10.0
HOSTILE = ("0", "-1", "nan", "inf", "1e-300", "1e300", "x", "")
FLAGS = ("--cpu-kv-gib", "--ssd-kv-gib", "--remote-kv-tib")
SIM = ("simulate", "-m", "Qwen/Qwen3-0.6B", "-g", "H100", "--num-requests", "5", "--rate", "5")
FLEET = ("fleet", "simulate", "-m", "Qwen/Qwen3-0.6B", "-g", "H100", "--num-requests", "5", "--rate", "5")
# the cache-replay fidelity models the tiers too: the same values get the same one-line errors
REPLAY_ARGS = ("--trace", "sample:mooncake-conversation", "--fidelity", "cache-replay")
REPLAY = ("fleet", "simulate", "-m", "Qwen/Qwen3-0.6B", "-g", "H100", *REPLAY_ARGS)


def _refused(argv: list[str], name: str) -> None:
    result = run_in_process(argv, limit_s=LIMIT_S)
    assert result.outcome == "error", (argv, result.outcome, result.stderr[-2000:])
    assert is_one_line_naming_a_field(result.stderr), result.stderr
    assert name in result.stderr or name.replace("_", "-") in result.stderr, result.stderr
    assert result.seconds < LIMIT_S


@pytest.mark.parametrize("base", [SIM, FLEET, REPLAY], ids=["simulate", "fleet simulate", "cache replay"])
@pytest.mark.parametrize("flag", FLAGS)
def test_hostile_tier_flags_are_refused(base: tuple[str, ...], flag: str) -> None:
    for value in HOSTILE:
        _refused([*base, flag, (" " + value) if value.startswith("-") else value], flag.lstrip("-").replace("-", "_"))


def test_tiers_without_prefix_caching_are_refused() -> None:
    _refused([*SIM, "--cpu-kv-gib", "8", "--no-prefix-caching"], "kv_tiers")


@pytest.mark.parametrize("field", ["cpu_kv_gib", "ssd_kv_gib", "remote_kv_tib"])
@pytest.mark.parametrize("value", [0, -1, 1e-300, 1e300, "nan", "lots"])
@pytest.mark.parametrize(
    "load", [("--rate", "5", "--num-requests", "5"), REPLAY_ARGS], ids=["full simulation", "cache replay"]
)
def test_a_fleet_files_hostile_tier_field_is_refused(
    tmp_path: Path, field: str, value: object, load: tuple[str, ...]
) -> None:
    pool = {"name": "main", "model": "Qwen/Qwen3-0.6B", "gpu": "H100", "replicas": 1, field: value}
    f = tmp_path / "fleet.yaml"
    f.write_text(yaml.safe_dump({"pools": [pool]}))
    _refused(["fleet", "simulate", "--fleet", str(f), *load], field)


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    data = tmp_path_factory.mktemp("tiers")
    with TestClient(
        create_app(ServeSettings(data_dir=data, db=data / "runs.sqlite")), base_url="http://127.0.0.1"
    ) as c:
        yield c


@pytest.mark.parametrize("field", ["cpu_kv_gib", "ssd_kv_gib", "remote_kv_tib"])
@pytest.mark.parametrize("value", [0, -1, 1e-300, 1e300, "nan"])
def test_the_api_refuses_the_same_values(client: TestClient, field: str, value: object) -> None:
    body = {"model": "Qwen/Qwen3-0.6B", "gpu": "H100", "rate": 5, "num_requests": 5, field: value}
    r = client.post("/api/v1/simulate", json=body)
    assert 400 <= r.status_code < 500, (field, value, r.status_code, r.text[:300])
    err = r.json()["error"]
    assert field in err["message"] or field in str(err.get("field")), err
    assert "\n" not in err["message"]
    pool = {"name": "main", "model": "Qwen/Qwen3-0.6B", "gpu": "H100", "replicas": 1, field: value}
    workload = {"arrival": {"kind": "poisson", "rate_per_s": 2}, "num_requests": 5}
    r = client.post("/api/v1/fleet/simulate", json={"fleet": {"pools": [pool]}, "workload": workload})
    assert 400 <= r.status_code < 500, (field, value, r.status_code, r.text[:300])
    assert "\n" not in r.json()["error"]["message"]


@pytest.mark.parametrize("flag", ["--cpu-tier-gib", "--shared-store-tib"])
def test_hostile_tier_lever_flags_are_refused(flag: str) -> None:
    base = ["fleet", "plan", "-m", "Qwen/Qwen3-0.6B", "-g", "H100", "--peak-rps", "1", "--levers", "cpu-tier"]
    for value in ("0", "-1", "nan", "1e-300", "1e300"):
        _refused([*base, flag, (" " + value) if value.startswith("-") else value], flag.lstrip("-").replace("-", "_"))


PD_POOLS = [
    {"name": "p", "model": "Qwen/Qwen3-0.6B", "gpu": "H100", "replicas": 1, "role": "prefill", "remote_kv_tib": 1},
    {"name": "d", "model": "Qwen/Qwen3-0.6B", "gpu": "H100", "replicas": 1, "role": "decode", "remote_kv_tib": 1},
]


@pytest.mark.parametrize("value", ["nowhere", 0, "", None, 1e300])
def test_a_hostile_kv_link_via_is_refused(tmp_path: Path, value: object) -> None:
    f = tmp_path / "fleet.yaml"
    f.write_text(yaml.safe_dump({"pools": PD_POOLS, "kv_link": {"via": value}}))
    _refused(["fleet", "simulate", "--fleet", str(f), "--rate", "5", "--num-requests", "5"], "via")


def test_the_hand_off_via_a_store_the_pools_lack_is_refused(tmp_path: Path) -> None:
    pools = [{k: v for k, v in p.items() if k != "remote_kv_tib"} for p in PD_POOLS]
    f = tmp_path / "fleet.yaml"
    f.write_text(yaml.safe_dump({"pools": pools, "kv_link": {"via": "store"}}))
    _refused(["fleet", "simulate", "--fleet", str(f), "--rate", "5", "--num-requests", "5"], "kv_link.via")


@pytest.mark.parametrize("name", ["cpu_weight", "ssd_weight", "remote_weight"])
@pytest.mark.parametrize("value", [-1, 1.5, 1e300, "nan"])
def test_a_hostile_tier_weight_of_the_precise_router_is_refused(tmp_path: Path, name: str, value: object) -> None:
    """A tier's weight is within 0..1 by meaning (a block in GPU memory counts 1; 0 ignores the tier)."""
    pool = {"name": "main", "model": "Qwen/Qwen3-0.6B", "gpu": "H100", "replicas": 2, "cpu_kv_gib": 1}
    router = {"name": "precise-prefix", "settings": {name: float(value) if value == "nan" else value}}
    f = tmp_path / "fleet.yaml"
    f.write_text(yaml.safe_dump({"pools": [pool], "router": router}))
    _refused(["fleet", "simulate", "--fleet", str(f), "--rate", "5", "--num-requests", "5"], name)


@pytest.mark.parametrize("value", ["nowhere", 0, None])
def test_the_api_refuses_a_hostile_kv_link_via(client: TestClient, value: object) -> None:
    workload = {"arrival": {"kind": "poisson", "rate_per_s": 2}, "num_requests": 5}
    body = {"fleet": {"pools": PD_POOLS, "kv_link": {"via": value}}, "workload": workload}
    r = client.post("/api/v1/fleet/simulate", json=body)
    assert 400 <= r.status_code < 500, (value, r.status_code, r.text[:300])
    err = r.json()["error"]
    assert "via" in err["message"] or "via" in str(err.get("field")), err
    assert "\n" not in err["message"]


WORKLOAD = {"arrival": {"kind": "poisson", "rate_per_s": 2}, "num_requests": 5}


@pytest.mark.parametrize(("field", "value"), [("kv_load", "async"), ("kv_store", "on-compute")])
def test_a_tier_mode_without_a_tier_is_refused_by_the_api(client: TestClient, field: str, value: str) -> None:
    """A load or store mode with no tier to apply it to would change nothing: named, not ignored
    (the CLI's --kv-load/--kv-store: tests/fuzz/hostile_cases.py special_cases)."""
    r = client.post("/api/v1/simulate", json={"model": "Qwen/Qwen3-0.6B", "gpu": "H100", "rate": 5, field: value})
    assert r.status_code == 400, r.text[:300]
    assert r.json()["error"]["message"].startswith(f"{field}={value!r}: sets how the KV tiers work")
    pool = {"name": "main", "model": "Qwen/Qwen3-0.6B", "gpu": "H100", "replicas": 1, field: value}
    r = client.post("/api/v1/fleet/simulate", json={"fleet": {"pools": [pool]}, "workload": WORKLOAD})
    assert r.status_code == 400, r.text[:300]
    assert r.json()["error"]["message"].startswith(f"pools.main.{field}={value!r}")


def test_a_tier_lever_size_without_its_lever_is_refused_by_the_api(client: TestClient) -> None:
    plan = {"model": "Qwen/Qwen3-0.6B", "candidates": [{"gpu": "H100"}], "traffic": {"peak_rps": 1}}
    r = client.post("/api/v1/fleet/plan", json={"plan": {**plan, "levers": ["router"], "cpu_tier_gib": 64}})
    assert r.status_code == 400, r.text[:300]
    assert r.json()["error"]["message"].startswith("plan.cpu_tier_gib=64.0: sizes the cpu-tier lever")
    # a lever name is checked before the job is queued (was: 202, then a failed job)
    r = client.post("/api/v1/fleet/plan", json={"plan": {**plan, "levers": ["cpu-tier", "cpu-teir"]}})
    assert r.status_code == 400, r.text[:300]
    assert r.json()["error"]["message"].startswith("levers='cpu-teir': one of ")
