"""Fixtures of the export tests: fleet files, and the vendored schemas (schemas/README.md)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import jsonschema

SCHEMAS = Path(__file__).parent / "schemas"
EXAMPLES = Path(__file__).parents[2] / "examples"

# Two pools behind least-outstanding routing: an autoscaled 70B pool (every autoscaler key set,
# on the in-flight signal) and a fixed 8B pool, with a gateway (rate limits, fallbacks, cache).
FLEET_GATEWAY = """\
pools:
  - name: big_pool
    model: meta-llama/Llama-3.1-70B
    gpu: H100
    tp: 4
    weights_dtype: fp8
    kv_cache_dtype: fp8
    max_model_len: 16384
    max_num_seqs: 256
    autoscaler:
      preset: ray-serve
      signal: inflight
      target: 24
      interval_s: 10
      min_replicas: 1
      max_replicas: 6
      upscale_stabilization_s: 30
      downscale_stabilization_s: 600
      max_step_up: 2
      tolerance: 0.05
  - name: small
    model: meta-llama/Llama-3.1-8B
    gpu: L40S
    replicas: 3
    enable_prefix_caching: false
    max_waiting: 100
router: least-outstanding
max_retries: 1
gateway:
  rate_limits:
    tenants:
      acme: {rpm: 600, tpm: 200000, max_concurrent: 20}
      beta: {rpm: 60, burst_requests: 10}
  fallback:
    chains:
      big_pool: [small, openai]
    max_retries: 1
  cache: {kind: exact, ttl_s: 300}
"""


def write_fleet(tmp_path: Path, text: str = FLEET_GATEWAY, name: str = "fleet.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def strict(schema: Any) -> Any:
    """``additionalProperties: false`` on every object schema that lists its ``properties`` and
    keeps no unknown fields (the API server's strict field validation; see schemas/README.md)."""
    if isinstance(schema, dict):
        out = {k: strict(v) for k, v in schema.items()}
        if (
            "properties" in out
            and "additionalProperties" not in out
            and not out.get("x-kubernetes-preserve-unknown-fields")
        ):
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [strict(v) for v in schema]
    return schema


def schema(name: str) -> dict[str, Any]:
    path = SCHEMAS / name
    raw = gzip.decompress(path.read_bytes()) if name.endswith(".gz") else path.read_bytes()
    loaded: dict[str, Any] = json.loads(raw)
    return loaded


def validate(instance: Any, schema_name: str) -> None:
    """Raise ``jsonschema.ValidationError`` unless ``instance`` fits the (strict) vendored schema."""
    jsonschema.Draft202012Validator(strict(schema(schema_name))).validate(instance)
