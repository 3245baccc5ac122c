"""``servecap emulate``: an OpenAI-compatible server timed by the engine model (no GPU)."""

from __future__ import annotations

from pathlib import Path

import click

from servecap.cli.options import DeploymentFlags, calibration_option, deployment_options


@click.command("emulate")
@deployment_options
@calibration_option
@click.option("--served-model-name", type=click.STRING, default=None,
              help="Name clients request (default: the model id).")
@click.option("--no-enable-prefix-caching", "no_prefix_caching", is_flag=True, default=False,
              help="Disable prefix caching.")
@click.option("--waiting-queue-limit", type=click.INT, default=None,
              help="Reject (503) beyond this many waiting requests.")
@click.option("--fixed-ttft-s", type=click.FLOAT, default=None, help="Reference mode: fixed TTFT, no engine model.")
@click.option("--fixed-itl-s", type=click.FLOAT, default=None, help="Reference mode: fixed inter-token latency.")
@click.option("--host", type=click.STRING, default="127.0.0.1", help="Bind address.")
@click.option("--port", type=click.INT, default=8000, help="Port.")
def emulate(
    deployment: DeploymentFlags,
    calibration: Path | None,
    served_model_name: str | None,
    no_prefix_caching: bool,
    waiting_queue_limit: int | None,
    fixed_ttft_s: float | None,
    fixed_itl_s: float | None,
    host: str,
    port: int,
) -> None:
    """Serve /v1/completions, /v1/chat/completions, /v1/models, /metrics and /health with the
    simulator's engine timing, in real time."""
    import uvicorn

    from servecap.cli.options import deployment_from_options, efficiency_from_options
    from servecap.emulator.server import engine_state, fixed_state, uvicorn_config
    from servecap.errors import ServecapError

    if not 0 < port < 65536:
        raise ServecapError("port", port, "must be in 1..65535")
    if (fixed_ttft_s is None) != (fixed_itl_s is None):
        raise ServecapError("fixed_itl_s", fixed_itl_s, "give both --fixed-ttft-s and --fixed-itl-s")
    if fixed_ttft_s is not None and fixed_itl_s is not None:
        if fixed_ttft_s < 0 or fixed_itl_s <= 0:
            raise ServecapError("fixed_itl_s", fixed_itl_s, "must be positive (and --fixed-ttft-s >= 0)")
        state = fixed_state(fixed_ttft_s, fixed_itl_s, model_name=served_model_name or deployment.model or "servecap-fixed")
        click.echo(f"servecap emulate: fixed TTFT {fixed_ttft_s * 1e3:g} ms, ITL {fixed_itl_s * 1e3:g} ms "
                   f"on http://{host}:{port}", err=True)
    else:
        from servecap.core.plan import plan

        dep, notes = deployment_from_options(deployment)
        eff, note = efficiency_from_options(calibration)
        p = plan(dep, efficiency=eff)
        name = served_model_name or dep.model.id
        stored = deployment.to_settings()
        stored["calibration"] = None if calibration is None else str(calibration)
        state = engine_state(p, model_name=name, enable_prefix_caching=not no_prefix_caching,
                             waiting_queue_limit=waiting_queue_limit, deployment_options=stored)
        for n in [*notes, *([note] if note else [])]:
            click.echo(f"note: {n}", err=True)
        click.echo(f"servecap emulate: {name} on {dep.num_gpus}x {dep.gpu.id}, {p.num_gpu_blocks} KV blocks, "
                   f"max_num_seqs {dep.engine.max_num_seqs}, on http://{host}:{port}", err=True)
    uvicorn.Server(uvicorn_config(state, host, port)).run()
