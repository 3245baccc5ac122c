"""plan, compare, simulate, capacity (one request each, three interfaces).

Small runs (a few hundred simulated requests, a 60 s capacity search) so the file runs in seconds.
Dropped fields: a simulation over HTTP is stored as a run (``run_id``, a new id each time) and
carries its sampled gauges for the page's plots (``timeseries``); ``simulate --json`` has neither.
"""

from __future__ import annotations

from tests.interfaces.harness import Case

_8B = ["-m", "meta-llama/Llama-3.1-8B", "-g", "H100"]
_8B_BODY = {"model": "meta-llama/Llama-3.1-8B", "gpu": "H100"}
_STORED = ("run_id", "timeseries")
_WHY_STORED = "the API stores a simulation as a run (a new id) and adds the gauges its page plots"

CASES: list[Case] = [
    Case("plan-default", ["plan"], ("POST", "/api/v1/plan", {})),
    Case(
        "plan-70b-tp4-8k-slos",
        [
            "plan",
            "-m",
            "meta-llama/Llama-3.1-70B",
            "-g",
            "H100",
            "--tp",
            "4",
            "-l",
            "8192",
            "--ttft-slo-ms",
            "1000",
            "--tpot-slo-ms",
            "50",
            "--peak-users",
            "5000",
        ],
        (
            "POST",
            "/api/v1/plan",
            {
                "model": "meta-llama/Llama-3.1-70B",
                "gpu": "H100",
                "tp": 4,
                "max_model_len": 8192,
                "ttft_slo_ms": 1000,
                "tpot_slo_ms": 50,
                "peak_users": 5000,
            },
        ),
    ),
    Case(
        "plan-think-time-turns-no-slo",
        ["plan", *_8B, "--think-time-s", "20", "--turns", "3", "--no-slo"],
        ("POST", "/api/v1/plan", {**_8B_BODY, "think_time_s": 20, "turns": 3, "no_slo": True}),
    ),
    Case(
        "compare-two-gpus",
        ["compare", "-m", "meta-llama/Llama-3.1-8B", "--gpus", "H100,A100-80GB", "--counts", "1,2"],
        (
            "POST",
            "/api/v1/compare",
            {"model": "meta-llama/Llama-3.1-8B", "gpus": ["H100", "A100-80GB"], "counts": [1, 2]},
        ),
    ),
    Case(
        "simulate-rate-seed",
        ["simulate", *_8B, "-r", "5", "--num-requests", "300", "--seed", "7"],
        ("POST", "/api/v1/simulate", {**_8B_BODY, "rate": 5, "num_requests": 300, "seed": 7}),
        drop=_STORED,
        why_dropped=_WHY_STORED,
    ),
    Case(
        "simulate-users-slo",
        ["simulate", *_8B, "-u", "20", "--duration-s", "60", "--seed", "3", "--ttft-slo-ms", "500"],
        ("POST", "/api/v1/simulate", {**_8B_BODY, "users": 20, "duration_s": 60, "seed": 3, "ttft_slo_ms": 500}),
        drop=_STORED,
        why_dropped=_WHY_STORED,
    ),
    # on an L40S the search's chat users are ~240 (~770 on an H100): the same closed-loop search and
    # the same fields for both interfaces, at a third of the simulated work
    Case(
        "capacity-users-short",
        ["capacity", "-m", "meta-llama/Llama-3.1-8B", "-g", "L40S", "--duration-s", "60", "--seed", "1"],
        ("POST", "/api/v1/capacity", {"model": "meta-llama/Llama-3.1-8B", "gpu": "L40S", "duration_s": 60, "seed": 1}),
    ),
    Case(
        "capacity-rate-slos",
        [
            "capacity",
            *_8B,
            "--rate",
            "--num-requests",
            "300",
            "--seed",
            "2",
            "--ttft-slo-ms",
            "1000",
            "--tpot-slo-ms",
            "50",
        ],
        (
            "POST",
            "/api/v1/capacity",
            {**_8B_BODY, "closed_loop": False, "num_requests": 300, "seed": 2, "ttft_slo_ms": 1000, "tpot_slo_ms": 50},
        ),
    ),
]
