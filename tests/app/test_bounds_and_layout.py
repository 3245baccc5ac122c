"""Numbers bounded by what they mean, work counted in events, and P/D layouts checked as the fleet
file is read: each refused in one line before any work, in the CLI and the API."""

from __future__ import annotations

import copy
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from fastapi.testclient import TestClient

from servecap.api import ServeSettings, create_app
from servecap.cli.main import cli

ROOT = Path(__file__).parents[2]
PD = yaml.safe_load((ROOT / "examples" / "fleet-pd.yaml").read_text())
CO = {
    "pools": [
        {"name": "main", "model": "meta-llama/Llama-3.1-8B", "gpu": "H100", "replicas": 2, "cold_start": "instant"}
    ]
}
WORKLOAD = {
    "arrival": {"kind": "poisson", "rate_per_s": 2},
    "num_requests": 20,
    "prompt_tokens": 200,
    "output_tokens": 20,
}
DAY = {**{k: v for k, v in WORKLOAD.items() if k != "num_requests"}, "arrival": {"kind": "poisson", "rate_per_s": 0.5},
       "duration_s": 86_400}  # fmt: skip


def _with(base: dict[str, Any], **top: Any) -> dict[str, Any]:
    out = copy.deepcopy(base)
    out.update(top)
    return out


def _pools(base: dict[str, Any], i: int, **fields: Any) -> dict[str, Any]:
    out = copy.deepcopy(base)
    out["pools"][i].update(fields)
    return out


# (fleet, workload, the field the refusal names)
BOUNDED = {
    "kv link 1e-9 GB/s": (
        _with(PD, kv_link={"kind": "infiniband", "bandwidth_gb_s": 1e-9}),
        WORKLOAD,
        "kv_link.bandwidth_gb_s",
    ),
    "kv link 1e-300 GB/s": (_with(PD, kv_link={"bandwidth_gb_s": 1e-300}), WORKLOAD, "kv_link.bandwidth_gb_s"),
    "kv link 1e300 us": (_with(PD, kv_link={"latency_us": 1e300}), WORKLOAD, "kv_link.latency_us"),
    "kv link 1e5 GB/s": (_with(PD, kv_link={"bandwidth_gb_s": 1e5}), WORKLOAD, "kv_link.bandwidth_gb_s"),
    "timeseries 1e-9 s": (_with(CO, timeseries_interval_s=1e-9), WORKLOAD, "timeseries_interval_s"),
    "scrape 1e-9 ms": (
        _with(CO, router={"name": "least-outstanding", "scrape_interval_ms": 1e-9}),
        WORKLOAD,
        "scrape_interval_ms",
    ),
    "cold start a year": (_pools(CO, 0, cold_start={"provisioning": 3.2e7}), WORKLOAD, "provisioning"),
    "load at 1 byte/s": (_pools(CO, 0, cold_start={"load_bandwidth_gb_s": 1e-9}), WORKLOAD, "load_bandwidth_gb_s"),
    "autoscaler every 1 us": (
        _pools(CO, 0, autoscaler={"max_replicas": 4, "interval_s": 1e-6}),
        WORKLOAD,
        "interval_s",
    ),
}
LAYOUT = {
    "prefill only": ({**PD, "pools": [PD["pools"][0]]}, "pools.role"),
    "decode only": ({**PD, "pools": [PD["pools"][1]]}, "pools.role"),
    "0 decode replicas": (_pools(PD, 1, replicas=0), "replicas"),
    "two models": (_pools(PD, 1, model="Qwen/Qwen2.5-7B-Instruct"), "pools.model"),
    "two engines": (_pools(PD, 1, engine="sglang"), "pools.engine"),
}


@pytest.fixture()
def client(tmp_path: Path) -> Iterator[TestClient]:
    with TestClient(
        create_app(ServeSettings(data_dir=tmp_path, db=tmp_path / "runs.sqlite")), base_url="http://127.0.0.1"
    ) as c:
        yield c


def _cli_refuses(tmp_path: Path, args: list[str], field: str) -> str:
    t0 = time.perf_counter()
    out = CliRunner().invoke(cli, args)
    assert time.perf_counter() - t0 < 10.0
    assert out.exit_code != 0, out.output
    text = str(out.exception) if out.exception is not None and not isinstance(out.exception, SystemExit) else out.output
    assert field in text and "Traceback" not in out.output, text
    return text


def _files(tmp_path: Path, fleet: dict[str, Any], workload: dict[str, Any]) -> tuple[str, str]:
    f, w = tmp_path / "fleet.yaml", tmp_path / "workload.yaml"
    f.write_text(yaml.safe_dump(fleet))
    w.write_text(yaml.safe_dump(workload))
    return str(f), str(w)


@pytest.mark.parametrize("case", list(BOUNDED))
def test_an_implausible_quantity_is_refused_with_its_range_in_the_cli(tmp_path: Path, case: str) -> None:
    fleet, workload, field = BOUNDED[case]
    f, w = _files(tmp_path, fleet, workload)
    text = _cli_refuses(tmp_path, ["fleet", "simulate", "--fleet", f, "--workload", w], field)
    assert "must be" in text and " to " in text  # the range, with its reason


@pytest.mark.parametrize("case", list(BOUNDED))
def test_an_implausible_quantity_is_refused_by_the_api_before_a_job(client: TestClient, case: str) -> None:
    fleet, workload, field = BOUNDED[case]
    r = client.post("/api/v1/fleet/simulate", json={"fleet": fleet, "workload": workload})
    assert r.status_code == 400, r.text
    assert field in r.json()["error"]["field"] and "\n" not in r.json()["error"]["message"]
    assert client.get("/api/v1/jobs").json() == []


def test_a_day_of_time_series_at_50_ms_is_refused_by_the_api(client: TestClient) -> None:
    r = client.post("/api/v1/fleet/simulate", json={"fleet": _with(CO, timeseries_interval_s=0.05), "workload": DAY})
    assert r.status_code == 400, r.text
    message = r.json()["error"]["message"]
    assert "86,400 s / 0.05 s = 1,728,000 samples per time series" in message and "--max-timeseries-samples" in message
    assert client.get("/api/v1/jobs").json() == []


def test_router_scrapes_are_counted_as_events(tmp_path: Path) -> None:
    fleet = _with(CO, router={"name": "least-outstanding", "scrape_interval_ms": 1})
    fleet["pools"][0]["replicas"] = 2_000
    f, w = _files(tmp_path, fleet, {**DAY, "arrival": {"kind": "poisson", "rate_per_s": 0.01}})
    text = _cli_refuses(tmp_path, ["fleet", "simulate", "--fleet", f, "--workload", w], "scrape_interval_ms")
    assert "router scrapes" in text and "events" in text and "SERVECAP_MAX_EVENTS" in text


def test_the_event_count_is_worked_by_hand() -> None:
    from servecap.app.limits import count_fleet_events
    from servecap.fleet.file_schema import fleet_from_dict
    from servecap.workload import workload_from_dict

    fleet = fleet_from_dict(_pools(_with(PD, router={"scrape_interval_ms": 100}, timeseries_interval_s=1.0), 0,
                                   autoscaler={"max_replicas": 4, "interval_s": 30}))  # fmt: skip
    workload = workload_from_dict({**WORKLOAD, "num_requests": None, "duration_s": 600})
    ev = count_fleet_events(fleet, workload, 600.0, replicas=6)
    assert ev.requests == 2 * 600  # 2/s x 600 s
    assert ev.samples_per_series == 600 and ev.series == 3  # the fleet's and each pool's gauges
    assert ev.router_scrapes == 600 / 0.1 * 6  # every 100 ms, each reads 6 replicas
    assert ev.link_transfers == 1200  # one KV transfer a request
    assert ev.autoscaler_ticks == 600 / 30  # one autoscaled pool
    assert ev.total == 1200 * 4 + 1200 + 600 * 3 + 36_000 + 20


@pytest.mark.parametrize("case", list(LAYOUT))
def test_a_pd_layout_is_checked_by_fleet_simulate_and_the_exports(tmp_path: Path, case: str) -> None:
    fleet, field = LAYOUT[case]
    f, w = _files(tmp_path, fleet, WORKLOAD)
    _cli_refuses(tmp_path, ["fleet", "simulate", "--fleet", f, "--workload", w], field)
    _cli_refuses(tmp_path, ["export", "keda", f], field)
    _cli_refuses(tmp_path, ["export", "pd", f], field)


@pytest.mark.parametrize("case", list(LAYOUT))
def test_a_pd_layout_is_checked_by_the_api(client: TestClient, case: str) -> None:
    fleet, field = LAYOUT[case]
    r = client.post("/api/v1/fleet/simulate", json={"fleet": fleet, "workload": WORKLOAD})
    assert r.status_code == 400 and field in r.json()["error"]["field"], r.text


@pytest.mark.parametrize("port", ["70000", "0", "-1", "8998"])
def test_export_pd_takes_a_port(tmp_path: Path, port: str) -> None:
    out = CliRunner().invoke(cli, ["export", "pd", str(ROOT / "examples" / "fleet-pd.yaml"), f"--port={port}"])
    text = out.output + (str(out.exception) if out.exception is not None else "")
    assert out.exit_code != 0 and "port" in text.lower(), text


def test_a_plausible_pd_fleet_still_exports_and_simulates(tmp_path: Path) -> None:
    fleet = _with(PD, kv_link={"kind": "infiniband", "bandwidth_gb_s": 50, "latency_us": 5})
    f, w = _files(tmp_path, fleet, WORKLOAD)
    assert CliRunner().invoke(cli, ["export", "pd", f, "--port", "8000"]).exit_code == 0
    out = CliRunner().invoke(cli, ["fleet", "simulate", "--fleet", f, "--workload", w, "--json"])
    assert out.exit_code == 0, out.output
