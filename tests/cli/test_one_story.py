"""plan, capacity and simulate tell one story: the same SLO by default, stated as mean or p99;
the same traffic gives the same closed-form users; the differences are named."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from servecap.cli.main import cli, run

runner = CliRunner()
M8 = ["-m", "meta-llama/Llama-3.1-8B", "-g", "H100"]
SMALL = [*M8, "-l", "4096", "--prompt-tokens", "200", "--output-tokens", "50"]


def _json(args: list[str]) -> dict:  # type: ignore[type-arg]
    result = runner.invoke(cli, args)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)  # type: ignore[no-any-return]


def test_plan_without_slo_uses_the_stated_default_interactive_slo() -> None:
    data = _json(["plan", "-m", "meta-llama/Llama-3.1-70B", "-g", "H200", "-w", "fp8", "-l", "8192", "--json"])
    assert data["slo"] == {"ttft_s": 2.0, "tpot_s": 0.1, "statistic": "mean", "source": "default"}
    assert data["tpot_s"] <= 0.1 and data["ttft_s"] <= 2.0
    text = runner.invoke(cli, ["plan", *M8, "-l", "8192"]).stdout
    assert "default interactive SLO" in text and "steady-state mean" in text
    free = _json(
        ["plan", "-m", "meta-llama/Llama-3.1-70B", "-g", "H200", "-w", "fp8", "-l", "8192", "--no-slo", "--json"]
    )
    assert free["slo"]["source"] == "none" and free["users_served"] > data["users_served"]


@pytest.mark.slow
def test_plan_with_capacitys_assumptions_gives_capacitys_closed_form() -> None:
    common = [*SMALL, "--tpot-slo-ms", "50", "--ttft-slo-ms", "1000", "--think-time-s", "5", "--turns", "3"]
    planned = _json(["plan", *common, "--json"])
    cap = _json(["capacity", *common, "--duration-s", "40", "--json"])
    assert planned["users_served"] == int(cap["planner_users"])
    assert cap["plan_users"] is not None and cap["plan_users"] != cap["planner_users"]
    names = [row["name"] for row in cap["assumptions"]]
    assert "SLOs checked against" in names and "mean prompt (tokens)" in names
    assert "3-turn chats resend their history" in cap["why"] and "p99" in cap["why"]
    assert "--think-time-s 5 --turns 3" in cap["why"]


# One request, two renderings: the --json test and the table test below ask `servecap capacity` the
# same question (the same flags but --json, which only picks the rendering), so the module computes
# its answer once (the memo below) and both run on one worker (one xdist group). Sound: the answer is a
# deterministic function of the validated request (seeded; catalogs read-only), both calls build that
# request through the same CLI code, and each test still parses and renders the answer itself.
CAPACITY_2000 = ["capacity", *SMALL, "--users", "2000", "--think-time-s", "5", "--duration-s", "40"]
_capacity_answers: dict[str, Any] = {}


@pytest.fixture()
def capacity_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """``capacity_from_request`` memoised by the exact request (its JSON) for this module's tests."""
    from servecap.app import capacity as use_case

    compute = use_case.capacity_from_request

    def once(request: Any, **options: Any) -> Any:
        key = request.model_dump_json() + repr(sorted((k, v) for k, v in options.items() if k != "progress"))
        if key not in _capacity_answers:
            _capacity_answers[key] = compute(request, **options)
        return _capacity_answers[key]

    monkeypatch.setattr(use_case, "capacity_from_request", once)


@pytest.mark.slow
@pytest.mark.xdist_group("capacity-2000-users")
@pytest.mark.usefixtures("capacity_once")
def test_capacity_users_takes_a_value_and_sizes_replicas() -> None:
    cap = _json([*CAPACITY_2000, "--json"])
    assert cap["closed_loop"] and cap["target"] == 2000
    assert cap["replicas_for_target"] == -(-2000 // int(cap["max_users"]))
    assert cap["slo"]["percentile"] == 99 and cap["slo"]["tpot_s"] == 0.1  # the same default SLO as plan


def test_plan_peak_users_points_to_the_simulated_answer() -> None:
    data = _json(["plan", *M8, "-l", "8192", "--peak-users", "2000", "--json"])
    assert any("servecap fleet plan" in note for note in data["notes"])


def test_simulate_flags_overload_first() -> None:
    args = ["simulate", *SMALL, "--rate", "400", "--num-requests", "3000"]
    data = _json([*args, "--json"])
    check = data["load_check"]
    assert check["overloaded"] and check["utilization"] > 1 and check["queue_growth_s_per_s"] > 0.02
    text = runner.invoke(cli, args).stdout
    assert text.startswith("OVERLOADED: 400.00 req/s offered")
    calm = _json(["simulate", *SMALL, "--rate", "2", "--num-requests", "100", "--json"])
    assert not calm["load_check"]["overloaded"] and calm["load_check"]["message"] is None


def test_calibration_for_another_gpu_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    cal = tmp_path / "cal.json"
    cal.write_text(
        json.dumps(
            {
                "schema": "servecap.calibration/1",
                "model": "meta-llama/Llama-3.1-8B",
                "gpu": "A100-80GB-SXM",
                "coefficients": {"bandwidth_efficiency": 0.7, "compute_efficiency": 0.5, "step_overhead_s": 0.003},
            }
        )
    )
    monkeypatch.setattr("sys.argv", ["servecap", "plan", *M8, "--calibration", str(cal)])
    with pytest.raises(SystemExit) as exc:
        run()
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "fitted for another deployment: gpu A100-80GB-SXM (here H100-SXM)" in err
    cal.write_text(cal.read_text().replace("A100-80GB-SXM", "H100-SXM"))
    assert _json(["plan", *M8, "--calibration", str(cal), "--json"])["users_served"] > 0


@pytest.mark.parametrize(
    "args",
    [
        ["plan", *M8, "-l", "1024"],
        ["plan", *M8, "--block-size", "7"],
        ["plan", "-m", "Qwen/Qwen3-32B", "-g", "B200", "-l", "200000", "-k", "fp8"],
        ["plan", *M8, "--rope-scaling", "{bad"],
    ],
)
def test_context_and_block_errors_are_one_line(
    args: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.argv", ["servecap", *args])
    with pytest.raises(SystemExit) as exc:
        run()
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and err.count("\n") == 0


def test_rope_scaling_flag_runs_past_the_trained_context() -> None:
    data = _json(
        [
            "plan",
            "-m",
            "Qwen/Qwen3-32B",
            "-g",
            "B200",
            "-l",
            "131072",
            "-k",
            "fp8",
            "--rope-scaling",
            '{"rope_type":"yarn","factor":4.0,"original_max_position_embeddings":32768}',
            "--json",
        ]
    )
    assert data["max_model_len"] == 131_072
    assert any("RoPE scaling (yarn, factor 4)" in w for w in data["warnings"])


def test_version() -> None:
    from servecap import __version__

    result = runner.invoke(cli, ["--version"])
    assert result.exit_code == 0 and result.output.strip() == f"servecap {__version__}"


@pytest.mark.slow
@pytest.mark.xdist_group("capacity-2000-users")
@pytest.mark.usefixtures("capacity_once")
def test_capacity_table_without_slo_flags_states_the_default_slos() -> None:
    """The human output with no --ttft-slo-ms/--tpot-slo-ms names the default SLOs it checked
    (it used to format the absent flags and crash)."""
    res = runner.invoke(cli, CAPACITY_2000)
    assert res.exit_code == 0, res.output
    assert "SLOs: p99 TTFT <= 2000 ms, p99 TPOT <= 100 ms" in res.output
