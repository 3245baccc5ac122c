"""A P/D fleet file as the configuration of real disaggregated serving: vLLM servers with a KV
connector and SGLang servers in a disaggregation mode, and the P/D router in front of them
(SGLang's ``sglang_router.launch_router --pd-disaggregation`` and ``vllm-router
--vllm-pd-disaggregation``, which take the same ``--prefill URL [BOOTSTRAP_PORT]``,
``--decode URL``, ``--prefill-policy`` and ``--decode-policy`` arguments).

What maps:

================================= ==========================================================
fleet file                        real system
================================= ==========================================================
``role: prefill`` / ``decode``    vLLM: ``--kv-transfer-config {"kv_connector":
                                  "NixlConnector","kv_role":"kv_both"}`` on both sides
                                  (vLLM's NixlConnector docs; the router tells each side its
                                  part); SGLang: ``--disaggregation-mode prefill|decode``
                                  with ``--disaggregation-transfer-backend`` ``nixl`` (or
                                  ``mooncake`` for RDMA link kinds) and, on prefill servers,
                                  ``--disaggregation-bootstrap-port``
the pool's engine settings        ``vllm serve`` flags (:mod:`servecap.export.vllm_args`);
                                  SGLang ``--tp`` (with attention DP, EP and speculative
                                  decoding: :mod:`servecap.export.frontier_args`) and
                                  ``--context-length``
``pd_router.prefill`` / ``decode``  ``--prefill-policy`` / ``--decode-policy``:
                                  ``prefix-affinity`` -> ``cache_aware``, ``power-of-two`` ->
                                  ``power_of_two``, ``round-robin`` -> ``round_robin``,
                                  ``random`` -> ``random``; others (``least-kv``,
                                  ``least-outstanding``, ...) have no SGLang equivalent: the
                                  nearest (``power_of_two``) with a warning; vLLM's router
                                  takes ``least-kv`` as ``kv_aware``
================================= ==========================================================

Not mapped (each named in the warnings): the link kind and its numbers (the hardware, and UCX's
or Mooncake's own settings), layer-wise streaming, autoscalers (per-role scaling needs the
serving platform's planner, e.g. NVIDIA Dynamo's), cold starts and failures.
"""

from __future__ import annotations

import json
import shlex
from typing import TYPE_CHECKING, TypedDict

from servecap.errors import ServecapError
from servecap.export.frontier_args import sglang_args
from servecap.export.source import ExportInput, dns_name
from servecap.export.vllm_args import cli_args, engine_kwargs

if TYPE_CHECKING:
    from servecap.fleet.file_schema import FleetFile

POLICY = {"prefix-affinity": "cache_aware", "power-of-two": "power_of_two", "round-robin": "round_robin"}
POLICY["random"] = "random"
BOOTSTRAP_PORT = 8998  # SGLang's default --disaggregation-bootstrap-port
NIXL = json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_both"}, separators=(",", ":"))


def _policy(name: str, side: str, warnings: list[str]) -> str:
    real = POLICY.get(name)
    if real is None:
        warnings.append(f"pd_router.{side}={name}: no such policy in SGLang's router; power_of_two instead")
        return "power_of_two"
    return real


class PdServer(TypedDict):
    """One pool's servers: its role, its hosts and the two engines' command lines."""

    role: str
    replicas: int
    hosts: list[str]
    vllm: str
    sglang: str


class PdConfig(TypedDict):
    servers: dict[str, PdServer]
    sglang_router: str
    vllm_router: str


def pd_config(ff: FleetFile, inp: ExportInput, *, port: int = 8000) -> tuple[PdConfig, list[str]]:
    """The servers' and the routers' command lines for a P/D fleet file (``ff``, as
    :func:`servecap.fleet.file_schema.load_fleet_file` read it, and ``inp``, the same file as
    the exporters read it); :func:`servecap.app.export.export_pd` reads the file."""
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
        raise ServecapError("port", port, "must be a TCP port, 1-65535")
    if port == BOOTSTRAP_PORT:
        raise ServecapError("port", port, f"is the prefill servers' bootstrap port ({BOOTSTRAP_PORT}); pick another")
    roles = {p.name: p.role for p in ff.pools}
    if not any(r != "both" for r in roles.values()):
        raise ServecapError("pools.role", "both", "not a disaggregated fleet file (no prefill or decode pool)")
    warnings: list[str] = []
    backend = "nixl" if ff.kv_link is None or ff.kv_link.kind in ("tcp", "nvlink") else "mooncake"
    servers: dict[str, PdServer] = {}
    urls: dict[str, list[str]] = {"prefill": [], "decode": []}
    for pool, model in zip(inp.pools, ff.pools, strict=True):
        role = model.role
        kw = engine_kwargs(pool, warnings)
        host = dns_name(pool.name)
        names = [f"{host}-{i}" for i in range(pool.replicas)]
        urls[role] += [f"http://{n}:{port}" for n in names]
        sglang = ["python", "-m", "sglang.launch_server", "--model-path", pool.model, "--port", str(port)]
        sglang += [*sglang_args(pool, warnings), "--context-length", str(kw["max_model_len"])]
        sglang += ["--disaggregation-mode", role, "--disaggregation-transfer-backend", backend]
        if role == "prefill":
            sglang += ["--disaggregation-bootstrap-port", str(BOOTSTRAP_PORT)]
        servers[pool.name] = {
            "role": role,
            "replicas": pool.replicas,
            "hosts": names,
            "vllm": shlex.join(["vllm", "serve", *cli_args(kw), "--port", str(port), "--kv-transfer-config", NIXL]),
            "sglang": shlex.join(sglang),
        }
        if model.autoscaler is not None:
            warnings.append(f"pools.{pool.name}.autoscaler: not mapped (per-role scaling is the platform's planner)")
    pr = ff.pd_router
    prefill, decode = ("prefix-affinity", "least-kv")
    if isinstance(pr, str):
        from servecap.policy.pd_router import PD_PRESETS

        prefill, decode = PD_PRESETS[pr]
    elif pr is not None:
        prefill, decode = pr.prefill, pr.decode
    policies = ["--prefill-policy", _policy(prefill, "prefill", warnings)]
    vl_policies = [
        *policies,
        "--decode-policy",
        "kv_aware" if decode == "least-kv" else POLICY.get(decode, "power_of_two"),
    ]
    policies += ["--decode-policy", _policy(decode, "decode", warnings)]
    sg_router = ["python", "-m", "sglang_router.launch_router", "--pd-disaggregation", *policies]
    vl_router = ["vllm-router", "--vllm-pd-disaggregation", *vl_policies]
    for u in urls["prefill"]:
        sg_router += ["--prefill", u, str(BOOTSTRAP_PORT)]
        vl_router += ["--prefill", u]
    for u in urls["decode"]:
        sg_router += ["--decode", u]
        vl_router += ["--decode", u]
    link = ff.kv_link
    if link is not None:
        warnings.append(
            f"kv_link: kind {link.kind}, scope {link.scope}"
            + (", streaming" if link.streaming else "")
            + ": not a router or server setting (the network, and UCX's or Mooncake's configuration)"
        )
    data: PdConfig = {"servers": servers, "sglang_router": shlex.join(sg_router), "vllm_router": shlex.join(vl_router)}
    return data, warnings
