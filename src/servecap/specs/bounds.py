"""Plausible ranges of the physical quantities a fleet file, a flag or a request body carries.

A number's range comes from what it means, not from what a float holds: a KV link slower than a
home connection or a scrape every nanosecond describe no deployment, and they turn a run into one
that never ends (a transfer of days, a billion scrapes). Each range is stated with its reason;
the schemas (``servecap.fleet.file_schema``) take ``ge``/``le`` and their descriptions from here, so the
JSON schema, the error and this table agree.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Bound:
    """``low <= value <= high`` in ``unit``, because ``why``."""

    low: float
    high: float
    unit: str
    why: str

    def describe(self) -> str:
        return f"{self.low:g} to {self.high:g} {self.unit}: {self.why}"


KV_LINK_BANDWIDTH_GB_S = Bound(
    0.1,
    2_000.0,
    "GB/s",
    "from 1 Gb/s Ethernet (0.125 GB/s) to above NVLink 5's 1.8 TB/s per GPU; a link outside it is no data-centre link",
)
KV_LINK_LATENCY_US = Bound(
    0.0, 1_000_000.0, "us", "a one-way latency past 1 s is no link within a region (an intercontinental RTT is ~0.3 s)"
)
KV_LINK_OVERHEAD_US = Bound(0.0, 1_000_000.0, "us", "a per-transfer setup cost past 1 s is no RDMA or TCP stack")
LOAD_BANDWIDTH_GB_S = Bound(
    0.01, 1_000.0, "GB/s", "weights load from 100 Mb/s object storage up to local NVMe arrays (tens of GB/s)"
)
COLD_START_PHASE_S = Bound(0.0, 86_400.0, "s", "a replica that takes more than a day to start is not autoscaled")
PHASE_CV = Bound(0.0, 10.0, "", "a coefficient of variation past 10 is no measured start-up time")
AUTOSCALER_INTERVAL_S = Bound(
    0.1,
    3_600.0,
    "s",
    "controllers poll every 2 s (Knative) to 15-30 s (HPA, KEDA); under 0.1 s or over an hour is none",
)
AUTOSCALER_WINDOW_S = Bound(0.0, 86_400.0, "s", "windows and stabilization periods of at most a day")
PREDICTIVE_STEP_S = Bound(1.0, 86_400.0, "s", "a rate curve read at least every second, at most daily")
SCRAPE_INTERVAL_MS = Bound(
    1.0, 600_000.0, "ms", "a router reads replica load every 1 ms to 10 min (0: it always sees the current load)"
)
TIMESERIES_INTERVAL_S = Bound(
    0.01, 86_400.0, "s", "a gauge sampled every 10 ms to once a day (Prometheus scrapes every 1-60 s)"
)


def check_scrape_interval_ms(value: float) -> float:
    """0 (the router sees the current load) or a scrape period in :data:`SCRAPE_INTERVAL_MS`."""
    b = SCRAPE_INTERVAL_MS
    if value != 0 and not b.low <= value <= b.high:
        raise ValueError(f"must be 0 or {b.describe()}")
    return value
