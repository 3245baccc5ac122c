"""bench, calibrate, accuracy, validate, monitor, export, runs, catalog (one request each, three interfaces).

bench and monitor have no HTTP endpoint: both connect to a URL the user gives, which a server
must not do for its clients (api/measure_routes.py).
"""

from __future__ import annotations

from pathlib import Path

from tests.interfaces.harness import Case

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _export(target: str, file: str, *flags: str, **options: object) -> Case:
    """``servecap export TARGET FILE`` and ``POST /api/v1/export`` with the file's text under the
    same name (the header names it, so the answers are equal byte for byte)."""
    path = EXAMPLES / file
    body: dict[str, object] = {"target": target, "name": str(path), "content": path.read_text(), **options}
    return Case(f"export-{target}-{path.stem}", ["export", target, str(path), *flags], ("POST", "/api/v1/export", body))


CASES: list[Case] = [
    _export("keda", "fleet-autoscaled.yaml"),
    _export("kserve", "fleet-autoscaled.yaml", "-n", "llm", namespace="llm"),
    _export("ray-serve", "fleet-simple.yaml", "--import-path", "app:build", import_path="app:build"),
    _export("production-stack", "fleet-simple.yaml", "--image", "repo/img:1", image="repo/img:1"),
    _export("litellm", "fleet-gateway.yaml"),
    Case(
        "validate-one-source",
        ["validate", "--source", "databasemart-rtx4090"],
        ("POST", "/api/v1/validate", {"source": "databasemart-rtx4090"}),
    ),
    Case(
        "validate-train-split-auto-steps",
        ["validate", "--source", "vllm-pr43232-b200", "--split", "train", "--step-model", "auto"],
        ("POST", "/api/v1/validate", {"source": "vllm-pr43232-b200", "split": "train", "step_model": "auto"}),
    ),
]
