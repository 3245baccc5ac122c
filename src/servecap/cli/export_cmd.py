"""`servecap export`: monitoring configuration built from a plan's numbers (grafana, alerts), and
the configuration of the serving systems users run, from a fleet file or a plan (ray-serve, keda,
kserve, production-stack, litellm; docs/export.md)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from servecap.app.export.monitoring import MonitoringExportResponse, MonitoringKind
from servecap.cli import options as o
from servecap.export.request import ExportTarget


def _monitoring(
    kind: MonitoringKind,
    plan_file: Path | None,
    deployment: o.DeploymentFlags,
    shape: tuple[int, int],
    slo_ms: tuple[float | None, float | None],
) -> MonitoringExportResponse:
    """The request from a PLAN.json or the deployment flags (planned here for the request
    ``shape``, prompt and output tokens), answered."""
    from servecap.app.export.monitoring import MonitoringExportRequest, monitoring_export
    from servecap.cli.inputs import request_shape, slo_from_ms
    from servecap.errors import ServecapError

    slo = slo_from_ms(*slo_ms)
    if plan_file is not None:
        from servecap.files import load_document

        data = load_document(plan_file, "plan_file", fmt="json")
        if not isinstance(data, dict):
            raise ServecapError("plan", "model", "missing: give a file written by `servecap plan --json`")
        source = str(plan_file)
    else:
        from servecap.core.plan import plan
        from servecap.core.plan_dict import plan_to_dict

        dep, _ = o.deployment_from_options(deployment)
        data = plan_to_dict(plan(dep, request=request_shape(*shape), slo=slo))
        source = f"servecap plan -m {data['model']} -g {data['gpu']} (tp {data['tp']}, {data['weights_dtype']} weights)"
    request = MonitoringExportRequest(kind=kind, plan=data, source=source, ttft_slo_ms=slo_ms[0], tpot_slo_ms=slo_ms[1])
    return monitoring_export(request)


def _common(f: Any) -> Any:
    return o.stack(
        click.argument("plan_file", type=o.PATH, required=False),
        o.deployment_options,
        click.option("--prompt-tokens", "-p", type=click.INT, default=1024, help="Typical prompt length."),
        click.option("--output-tokens", "-o", type=click.INT, default=128, help="Typical output length."),
        o.slo_options(None, None, "drawn/alerted on; default twice the plan's prediction"),
        click.option("--output", "out", type=o.OUT_PATH, default=None, help="Write here instead of stdout."),
        click.option("--json", "as_json", is_flag=True, default=False, help="Print one JSON object (kind, text)."),
    )(f)


def _write(text: str, out: Path | None) -> None:
    if out is None:
        click.echo(text, nl=False)
    else:
        from servecap.outputs import write_text

        write_text(out, text, "--output")
        click.echo(f"wrote {out}", err=True)


class _ExportGroup(click.Group):
    """An unknown target is one line naming the targets (not click's usage block)."""

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        from servecap.errors import ServecapError, did_you_mean

        name = args[0] if args else ""
        if name and not name.startswith("-") and self.get_command(ctx, name) is None:
            targets = list(self.commands)
            raise ServecapError(
                "target", name, f"unknown export target; one of {', '.join(targets)}" + did_you_mean(name, targets)
            )
        return super().resolve_command(ctx, args)


@click.group("export", cls=_ExportGroup)
def export_group() -> None:
    """Write configuration from a plan or a fleet file: Grafana, alert rules, Ray Serve, KEDA, KServe, production-stack, LiteLLM.

    grafana, alerts: a Grafana dashboard or Prometheus alert rules from a PLAN.json written by
    `servecap plan --json`, or the deployment flags of `servecap plan`.

    ray-serve, keda, kserve, production-stack, litellm: the serving system's configuration from
    a FLEET.yaml (pools, autoscaler, router, gateway) or a PLAN.json; settings the target cannot
    express are named in warnings on stderr (docs/export.md).
    """


@export_group.command("grafana")
@_common
def grafana(
    plan_file: Path | None,
    deployment: o.DeploymentFlags,
    prompt_tokens: int,
    output_tokens: int,
    ttft_slo_ms: float | None,
    tpot_slo_ms: float | None,
    out: Path | None,
    as_json: bool,
) -> None:
    """A Grafana dashboard (JSON): queue depth, running, KV usage, TTFT/ITL p99 with the SLO line, token rates, preemptions."""
    resp = _monitoring("grafana", plan_file, deployment, (prompt_tokens, output_tokens), (ttft_slo_ms, tpot_slo_ms))
    _write(resp.model_dump_json() + "\n" if as_json else resp.text, out)


@export_group.command("alerts")
@_common
def alerts(
    plan_file: Path | None,
    deployment: o.DeploymentFlags,
    prompt_tokens: int,
    output_tokens: int,
    ttft_slo_ms: float | None,
    tpot_slo_ms: float | None,
    out: Path | None,
    as_json: bool,
) -> None:
    """Prometheus alerting rules (YAML): queue depth, KV usage, TTFT/ITL p99 over the SLO, preemptions."""
    resp = _monitoring("alerts", plan_file, deployment, (prompt_tokens, output_tokens), (ttft_slo_ms, tpot_slo_ms))
    _write(resp.model_dump_json() + "\n" if as_json else resp.text, out)


def _default(name: str) -> str:
    """The option's default, from the request model (defaults live once, in app/)."""
    from servecap.export.request import option_default

    return str(option_default(name))


def _help(name: str) -> str:
    from servecap.export.request import ExportOptions

    return ExportOptions.model_fields[name].description or ""


def _serving_options(*extra: o.Decorator) -> Callable[[o.F], o.F]:
    return o.stack(
        click.argument("source", type=o.PATH),
        click.option("--output", "-o", "out", type=o.OUT_PATH, default=None, help="Write here instead of stdout."),
        click.option("--replicas", type=click.IntRange(min=1), default=None, help=_help("replicas")),
        *extra,
        click.option(
            "--json", "as_json", is_flag=True, default=False, help="Print one JSON object (target, text, warnings)."
        ),
    )


_NAMESPACE = click.option("--namespace", "-n", default=None, help=_help("namespace"))
_IMAGE = click.option("--image", default=_default("image"), show_default=True, help=_help("image"))
_PROMETHEUS = click.option(
    "--prometheus-url", default=_default("prometheus_url"), show_default=True, help=_help("prometheus_url")
)


def _run_export(target: ExportTarget, source: Path, out: Path | None, as_json: bool, **kw: Any) -> None:
    """Read ``source``, answer the request, write the text (or, with ``--json``, the response)."""
    from servecap.app.export import ExportRequest, export_file
    from servecap.files import read_bytes

    resp = export_file(ExportRequest(target=target, name=str(source), content=read_bytes(source, "file"), **kw))
    for w in resp.warnings:
        click.echo(f"warning: {w}", err=True)
    _write(resp.model_dump_json() + "\n" if as_json else resp.text, out)


@export_group.command("ray-serve")
@_serving_options(
    click.option("--import-path", default=None, metavar="MODULE:APP", help=_help("import_path")),
    click.option(
        "--deployment-name", default=_default("deployment_name"), show_default=True, help=_help("deployment_name")
    ),
)
def ray_serve(
    source: Path, out: Path | None, replicas: int | None, import_path: str | None, deployment_name: str, as_json: bool
) -> None:
    """Ray Serve config (serve deploy): Ray Serve LLM with vLLM, autoscaling_config from the autoscaler."""
    _run_export(
        "ray-serve", source, out, as_json, replicas=replicas, import_path=import_path, deployment_name=deployment_name
    )


@export_group.command("keda")
@_serving_options(_NAMESPACE, _IMAGE, _PROMETHEUS)
def keda(
    source: Path,
    out: Path | None,
    replicas: int | None,
    namespace: str | None,
    image: str,
    prometheus_url: str,
    as_json: bool,
) -> None:
    """Kubernetes Deployment + Service running vLLM with the plan's flags, and a KEDA ScaledObject."""
    _run_export(
        "keda", source, out, as_json, replicas=replicas, namespace=namespace, image=image, prometheus_url=prometheus_url
    )


@export_group.command("kserve")
@_serving_options(_NAMESPACE, _PROMETHEUS)
def kserve(
    source: Path, out: Path | None, replicas: int | None, namespace: str | None, prometheus_url: str, as_json: bool
) -> None:
    """KServe InferenceService: Hugging Face runtime with the vLLM backend, KEDA autoscaling."""
    _run_export("kserve", source, out, as_json, replicas=replicas, namespace=namespace, prometheus_url=prometheus_url)


@export_group.command("production-stack")
@_serving_options(
    _IMAGE,
    click.option("--session-key", default=_default("session_key"), show_default=True, help=_help("session_key")),
)
def production_stack(
    source: Path, out: Path | None, replicas: int | None, image: str, session_key: str, as_json: bool
) -> None:
    """vLLM production-stack Helm values: modelSpec per pool, routerSpec from the router."""
    _run_export("production-stack", source, out, as_json, replicas=replicas, image=image, session_key=session_key)


@export_group.command("litellm")
@_serving_options(
    click.option("--api-base", default=_default("api_base"), show_default=True, help=_help("api_base")),
)
def litellm(source: Path, out: Path | None, replicas: int | None, api_base: str, as_json: bool) -> None:
    """LiteLLM proxy config.yaml: model list, routing strategy, fallbacks, per-tenant limits."""
    _run_export("litellm", source, out, as_json, replicas=replicas, api_base=api_base)


@export_group.command("kv-tiers")
@_serving_options()
def kv_tiers(source: Path, out: Path | None, replicas: int | None, as_json: bool) -> None:
    """The pools' KV tiers as vLLM native offloading flags, LMCache settings (YAML, env) and KServe
    kvCacheOffloading; what does not map is named on stderr."""
    _run_export("kv-tiers", source, out, as_json, replicas=replicas)


@export_group.command("pd")
@click.argument("source", type=o.PATH)
@click.option("--output", "-o", "out", type=o.OUT_PATH, default=None, help="Write here instead of stdout.")
@click.option(
    "--port", type=click.IntRange(1, 65535), default=8000, show_default=True, help="The servers' HTTP port (1-65535)."
)
def pd(source: Path, out: Path | None, port: int) -> None:
    """A P/D fleet file as real disaggregated serving: vLLM (--kv-transfer-config) and SGLang
    (--disaggregation-mode) server commands per role, SGLang's and vLLM's P/D router arguments;
    what does not map is named on stderr."""
    import yaml

    from servecap.app.export import YAML_WIDTH, export_pd

    data, warnings = export_pd(source, port=port)
    for w in warnings:
        click.echo(f"warning: {w}", err=True)
    _write(f"# servecap export pd {source}\n" + yaml.safe_dump(data, sort_keys=False, width=YAML_WIDTH), out)
