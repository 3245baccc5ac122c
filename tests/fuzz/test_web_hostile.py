"""Generators for issue 33's new shapes: any Host and Origin header, any number in a fleet's
physical fields (P/D link, cold start, autoscaler, scrape and time-series periods) and any JSON
value in a P/D decode request's bootstrap fields. Each ends in a one-line 4xx (or, for values in
range, is accepted): never a 5xx, a traceback or a hang."""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from servecap.api import ServeSettings, create_app
from servecap.api.guard import parse_authority

SETTINGS = settings(
    max_examples=120, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck)
)
POOL = {"model": "meta-llama/Llama-3.1-8B", "gpu": "H100", "replicas": 1, "cold_start": "instant"}
PD = {"pools": [{**POOL, "name": "p", "role": "prefill"}, {**POOL, "name": "d", "role": "decode"}]}
WORKLOAD = {"arrival": {"kind": "poisson", "rate_per_s": 1}, "num_requests": 5, "prompt_tokens": 50, "output_tokens": 5}


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    tmp = tmp_path_factory.mktemp("webfuzz")
    with TestClient(
        create_app(ServeSettings(data_dir=tmp, db=tmp / "runs.sqlite")), base_url="http://127.0.0.1:8080"
    ) as c:
        yield c


def _one_line(r: Any) -> None:
    assert r.status_code < 500, (r.status_code, r.text)
    if r.status_code >= 400:
        err = r.json()["error"]
        assert "\n" not in err["message"] and "Traceback" not in err["message"]


_HOSTISH = st.one_of(
    st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=40),
    st.builds(lambda h, p, t: f"{h}:{p}{t}", st.sampled_from(["localhost", "127.0.0.1", "[::1]", "evil.example"]),
              st.integers(-5, 100_000), st.sampled_from(["", "@evil.example", "evil", "/x", ":1", "#a"])),
)  # fmt: skip


@given(host=_HOSTISH)
@SETTINGS
def test_any_host_is_parsed_or_refused(client: TestClient, host: str) -> None:
    r = client.get("/api/v1/health", headers={"Host": host})
    _one_line(r)
    parsed = parse_authority(host)
    if r.status_code == 200:  # answered: a well-formed loopback name and a real port
        assert parsed is not None and (parsed[1] is None or 1 <= parsed[1] <= 65535)
        assert "@" not in host and "/" not in host
    elif parsed is None:
        assert r.status_code == 400


@given(origin=_HOSTISH.map(lambda h: f"http://{h}"), extra=st.sampled_from(["", "/", "/x", "?a", "#b"]))
@SETTINGS
def test_any_origin_but_the_own_is_refused(client: TestClient, origin: str, extra: str) -> None:
    value = origin + extra
    r = client.post("/api/v1/plan", json={"model": "meta-llama/Llama-3.1-8B", "gpu": "H100"}, headers={"Origin": value})
    _one_line(r)
    assert (r.status_code == 200) == (value == "http://127.0.0.1:8080")


_NUMBERS = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False, width=64),
    st.sampled_from([0.0, -0.0, 1e-300, 1e-9, 5e-324, 1e300, 1.7976931348623157e308, -1.0]),
)
FIELDS: list[tuple[str, Any]] = [
    ("kv_link.bandwidth_gb_s", lambda v: {**PD, "kv_link": {"bandwidth_gb_s": v}}),
    ("kv_link.latency_us", lambda v: {**PD, "kv_link": {"latency_us": v}}),
    ("kv_link.overhead_us", lambda v: {**PD, "kv_link": {"overhead_us": v}}),
    ("timeseries_interval_s", lambda v: {**PD, "timeseries_interval_s": v}),
    ("router.scrape_interval_ms", lambda v: {"pools": [POOL], "router": {"scrape_interval_ms": v}}),
    ("cold_start.load_bandwidth_gb_s", lambda v: {"pools": [{**POOL, "cold_start": {"load_bandwidth_gb_s": v}}]}),
    ("autoscaler.interval_s", lambda v: {"pools": [{**POOL, "autoscaler": {"max_replicas": 2, "interval_s": v}}]}),
]


@pytest.mark.parametrize("field", [f for f, _ in FIELDS])
def test_any_number_in_a_physical_field_is_bounded(client: TestClient, field: str) -> None:
    build = dict(FIELDS)[field]

    @given(value=_NUMBERS)
    @SETTINGS
    def check(value: float) -> None:
        from servecap.errors import ServecapError
        from servecap.fleet.file_schema import fleet_from_dict

        assert math.isfinite(value)
        t0 = time.perf_counter()
        try:
            fleet_from_dict(build(value))  # parsed: the value is in its range
        except ServecapError as err:
            assert "\n" not in str(err) and field.split(".")[-1] in str(err)
        assert time.perf_counter() - t0 < 2.0

    check()


@given(host=st.one_of(st.none(), st.text(max_size=30), st.integers(), st.lists(st.integers(), max_size=2)),
       port=st.one_of(st.none(), st.integers(-10, 100_000), st.text(max_size=8), st.floats(), st.booleans()))  # fmt: skip
@SETTINGS
def test_any_bootstrap_field_is_validated_without_a_connection(host: Any, port: Any) -> None:
    from servecap.emulator.pd import PdRefused, bootstrap_target

    try:
        name, number = bootstrap_target(host, port, None)
    except PdRefused as err:
        assert err.status == 400 and "\n" not in err.message and "Error" not in err.message
        return
    assert isinstance(number, int) and 1 <= number <= 65535
    assert all(c not in name for c in "/?#@ ") and (":" not in name or name.count(":") >= 2)  # a name or an IP
