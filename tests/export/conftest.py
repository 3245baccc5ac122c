from __future__ import annotations

import json
from pathlib import Path

import pytest

from servecap.catalog import lookup_gpu, resolve_model
from servecap.core.defaults import build_deployment
from servecap.core.plan import plan
from servecap.core.plan_dict import plan_to_dict


@pytest.fixture()
def plan_file(tmp_path: Path) -> Path:
    """`servecap plan -m meta-llama/Llama-3.1-8B -g H100 -l 8192 --json`, written to a file."""
    dep = build_deployment(resolve_model("meta-llama/Llama-3.1-8B"), lookup_gpu("H100"), max_model_len=8192)
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan_to_dict(plan(dep))))
    return path
