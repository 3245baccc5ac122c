"""Agent sessions in the fleet planner: their steady request rate (sessions x requests per
session), a window of them (enough sessions to fill it), and a rate scale on the session rate."""

from __future__ import annotations

import math

import numpy as np
import pytest

from servecap.fleet.plan_window import scaled, window_workload
from servecap.workload import workload_from_dict, workload_rate
from servecap.workload.agentic_spec import AgenticArrival

AGENTIC = {
    "arrival": {
        "kind": "agentic",
        "sessions": 100,
        "session_rate_per_s": 0.5,
        "turns_mean": 4.0,
        "subagent_probability": 0.25,
        "subagent_turns_mean": 2.0,
    }
}


def test_steady_rate_by_hand() -> None:
    """0.5 sessions/s x 4 turns x (1 + 0.25 x 2 sub-agent turns) = 3 requests/s."""
    spec = workload_from_dict(AGENTIC)
    assert workload_rate(spec, np.array([0.0, 500.0])).tolist() == [3.0, 3.0]


def test_a_window_keeps_the_sessions() -> None:
    w = window_workload(workload_from_dict(AGENTIC), 0.0, 301.0, steady=True)
    assert isinstance(w.arrival, AgenticArrival)
    assert w.arrival.sessions == math.ceil(0.5 * 301.0) and w.duration_s == 301.0


def test_scaled_scales_the_session_rate() -> None:
    s = scaled(workload_from_dict(AGENTIC), 2.0)
    assert isinstance(s.arrival, AgenticArrival)
    assert s.arrival.session_rate_per_s == pytest.approx(1.0)
