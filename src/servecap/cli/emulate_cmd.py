"""``servecap emulate``: an OpenAI-compatible server timed by the engine model (no GPU).

``--replicas N`` starts N emulators on consecutive ports (``--port``, ``--port + 1``, ...), each
its own engine in its own process. Processes, not N servers in one event loop: each replica
stands for a GPU of its own, and the emulator's timing depends on its process writing every
token on schedule; N replicas in one process would share one event loop and one GIL, so one
busy replica would delay the others' tokens (a coupling real replicas do not have) and all N
would be bound to one core. The parent builds the plan once, hands it to each child, and on
Ctrl-C (or SIGTERM) stops every child and waits for it.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from servecap.cli.numbers import FINITE
from servecap.cli.options import DeploymentFlags, calibration_option, deployment_options


@dataclass(frozen=True, slots=True)
class _Replica:
    """What a replica process needs to build its server (picklable)."""

    host: str
    port: int
    model_name: str
    control: bool
    plan: Any = None  # engine mode
    prefix_caching: bool = True
    waiting_queue_limit: int | None = None
    deployment_options: dict[str, Any] | None = None
    fixed: tuple[float, float] | None = None  # (ttft_s, itl_s): reference mode
    request_overhead_s: float | None = None  # None: the plan's request_overhead_s less the own HTTP path
    role: str = "both"  # prefill | decode: a P/D role (servecap.emulator.pd)
    kv_link: str = "infiniband"
    pd_secret: str | None = None  # the secret a P/D pair shares (the bootstrap endpoints')
    bootstrap_peers: tuple[str, ...] = ()  # the only prefill servers a decode server fetches from


def _state(r: _Replica) -> Any:
    from servecap.emulator.server import engine_state, fixed_state

    if r.fixed is not None:
        return fixed_state(r.fixed[0], r.fixed[1], model_name=r.model_name, enable_control_endpoints=r.control)
    return engine_state(
        r.plan,
        model_name=r.model_name,
        enable_prefix_caching=r.prefix_caching,
        waiting_queue_limit=r.waiting_queue_limit,
        deployment_options=r.deployment_options,
        enable_control_endpoints=r.control,
        request_overhead_s=r.request_overhead_s,
        role=r.role,
        kv_link=r.kv_link,
        pd_secret=r.pd_secret,
        bootstrap_peers=r.bootstrap_peers,
    )


def _serve(r: _Replica) -> None:
    """One replica's server until it is told to stop (runs in the replica's process)."""
    import uvicorn

    from servecap.emulator.server import uvicorn_config

    with contextlib.suppress(KeyboardInterrupt):
        uvicorn.Server(uvicorn_config(_state(r), r.host, r.port)).run()


def _run_replicas(replicas: list[_Replica]) -> None:
    """Start one process per replica; return when they have all stopped (Ctrl-C, SIGTERM, or
    one failing, which stops the rest); raise ServecapError when one failed."""
    import multiprocessing as mp
    import signal

    from servecap.errors import ServecapError

    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_serve, args=(r,), name=f"servecap-emulate-{r.port}") for r in replicas]

    def _stop(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, _stop)
    # SIGINT too, explicitly: a process started in the background by a shell inherits SIGINT
    # ignored, and Python then installs no KeyboardInterrupt for it (`kill -INT` did nothing)
    previous_int = signal.signal(signal.SIGINT, _stop)
    failed: list[str] = []
    try:
        for p, r in zip(procs, replicas, strict=True):
            p.start()
            click.echo(f"replica on http://{r.host}:{r.port} (pid {p.pid})", err=True)
        while all(p.is_alive() for p in procs):
            procs[0].join(timeout=0.2)
        failed = [
            f"port {r.port} exited with {p.exitcode}"
            for p, r in zip(procs, replicas, strict=True)
            if not p.is_alive() and p.exitcode != 0
        ]
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        signal.signal(signal.SIGINT, previous_int)
        for p in procs:
            if p.is_alive():
                p.terminate()  # SIGTERM: uvicorn shuts down gracefully
        for p in procs:
            p.join(timeout=10.0)
            if p.is_alive():
                p.kill()
                p.join()
    if failed:
        raise ServecapError("replicas", len(replicas), "a replica stopped: " + "; ".join(failed))


@click.command("emulate")
@deployment_options
@calibration_option
@click.option(
    "--served-model-name", type=click.STRING, default=None, help="Name clients request (default: the model id)."
)
@click.option(
    "--no-enable-prefix-caching",
    "--no-prefix-caching",
    "no_prefix_caching",
    is_flag=True,
    default=False,
    help="Disable prefix caching.",
)
@click.option(
    "--waiting-queue-limit",
    type=click.IntRange(min=0),
    default=None,
    help="Reject (503) beyond this many waiting requests.",
)
@click.option("--fixed-ttft-s", type=FINITE, default=None, help="Reference mode: fixed TTFT, no engine model.")
@click.option("--fixed-itl-s", type=FINITE, default=None, help="Reference mode: fixed inter-token latency.")
@click.option("--host", type=click.STRING, default="127.0.0.1", help="Bind address.")
@click.option("--port", type=click.INT, default=8000, help="Port (the first replica's with --replicas).")
@click.option(
    "--replicas",
    type=click.IntRange(min=1, max=64),
    default=1,
    help="Start N replicas, each its own engine and process, on consecutive ports.",
)
@click.option(
    "--enable-control-endpoints",
    is_flag=True,
    default=False,
    help="Serve POST /servecap/stats/reset (off by default: it changes server state).",
)
@click.option(
    "--request-overhead-ms",
    type=click.FloatRange(min=0, max=10_000),
    default=None,
    help="Per-request server cost charged before the engine sees a request (default: the fitted 6.5 ms "
    "less the emulator's own ~1 ms HTTP path, so TTFT matches simulate; 0: none).",
)
@click.option(
    "--role",
    type=click.Choice(["both", "prefill", "decode"]),
    default="both",
    help="A P/D role behind SGLang's router in PD mode: prefill answers one token and serves the "
    "KV on its own port as the bootstrap port; decode fetches it (docs/fleet.md).",
)
@click.option(
    "--kv-link",
    type=click.Choice(["nvlink", "infiniband", "roce", "tcp"]),
    default="infiniband",
    help="The link a prefill server sends KV over (its bandwidth, latency, overhead).",
)
@click.option(
    "--pd-secret",
    envvar="SERVECAP_PD_SECRET",
    default=None,
    help="With --role: the secret a prefill and a decode server share (at least 16 visible characters; "
    "$SERVECAP_PD_SECRET): a prefill server hands a room's KV only to a request that carries it.",
)
@click.option(
    "--bootstrap-peer",
    "bootstrap_peers",
    multiple=True,
    help="With --role decode: HOST:PORT of a prefill server's bootstrap port (repeatable); a request "
    "naming any other is refused [default: any host name or IP address and port 1-65535].",
)
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
    replicas: int,
    enable_control_endpoints: bool,
    request_overhead_ms: float | None,
    role: str,
    kv_link: str,
    pd_secret: str | None,
    bootstrap_peers: tuple[str, ...],
) -> None:
    """Serve /v1/completions, /v1/chat/completions, /v1/models, /metrics and /health with the
    simulator's engine timing, in real time."""
    from servecap.errors import ServecapError

    _check_pd_flags(role, pd_secret, bootstrap_peers)  # before any port is bound
    if not 0 < port < 65536:
        raise ServecapError("port", port, "must be in 1..65535")
    if port + replicas - 1 > 65535:
        raise ServecapError("replicas", replicas, f"ports {port}..{port + replicas - 1} go past 65535")
    _check_ports_free(host, port, replicas)  # before any URL is printed (uvicorn's [Errno 98] came after it)
    if (fixed_ttft_s is None) != (fixed_itl_s is None):
        raise ServecapError("fixed_itl_s", fixed_itl_s, "give both --fixed-ttft-s and --fixed-itl-s")
    if role != "both" and fixed_ttft_s is not None:
        raise ServecapError("role", role, "a P/D role needs the engine model, not --fixed-ttft-s")
    if fixed_ttft_s is not None and fixed_itl_s is not None:
        if fixed_ttft_s < 0 or fixed_itl_s <= 0:
            raise ServecapError("fixed_itl_s", fixed_itl_s, "must be positive (and --fixed-ttft-s >= 0)")
        base = _Replica(
            host,
            port,
            served_model_name or deployment.model or "servecap-fixed",
            enable_control_endpoints,
            fixed=(fixed_ttft_s, fixed_itl_s),
        )
        what = f"fixed TTFT {fixed_ttft_s * 1e3:g} ms, ITL {fixed_itl_s * 1e3:g} ms"
    else:
        from servecap.cli.options import deployment_from_options, efficiency_from_options
        from servecap.core.plan import plan

        dep, notes = deployment_from_options(deployment)
        eff, note = efficiency_from_options(calibration)
        p = plan(dep, efficiency=eff)
        name = served_model_name or dep.model.id
        stored = deployment.to_settings()
        stored["calibration"] = None if calibration is None else str(calibration)
        base = _Replica(
            host,
            port,
            name,
            enable_control_endpoints,
            plan=p,
            prefix_caching=not no_prefix_caching,
            waiting_queue_limit=waiting_queue_limit,
            deployment_options=stored,
            request_overhead_s=None if request_overhead_ms is None else request_overhead_ms / 1e3,
            role=role,
            kv_link=kv_link,
            pd_secret=pd_secret,
            bootstrap_peers=bootstrap_peers,
        )
        for n in [*notes, *([note] if note else [])]:
            click.echo(f"note: {n}", err=True)
        what = (
            f"{name} on {dep.num_gpus}x {dep.gpu.id}, {p.num_gpu_blocks} KV blocks, "
            f"max_num_seqs {dep.engine.max_num_seqs}"
        )
    if replicas == 1:
        click.echo(f"servecap emulate: {what}, on http://{host}:{port}", err=True)
        _serve(base)
        return
    click.echo(
        f"servecap emulate: {replicas} replicas of {what}, on http://{host}:{port}.."
        f"{port + replicas - 1} (Ctrl-C stops them all)",
        err=True,
    )
    from dataclasses import replace

    _run_replicas([replace(base, port=port + i) for i in range(replicas)])


def _check_pd_flags(role: str, secret: str | None, peers: tuple[str, ...]) -> None:
    """A P/D role needs the pair's secret; peers are HOST:PORT, for a decode server."""
    from servecap.emulator.pd import parse_peer
    from servecap.errors import ServecapError

    if role == "both":
        if secret is not None or peers:
            raise ServecapError("role", role, "--pd-secret and --bootstrap-peer are for --role prefill or decode")
        return
    if secret is None:
        raise ServecapError(
            "pd_secret", None, "a P/D role needs --pd-secret (or $SERVECAP_PD_SECRET), shared by the pair"
        )
    if len(secret) < 16 or any(not "\x21" <= c <= "\x7e" for c in secret):
        raise ServecapError("pd_secret", "***", "must be at least 16 visible ASCII characters, no whitespace")
    if peers and role != "decode":
        raise ServecapError("bootstrap_peer", peers[0], "only a decode server fetches from bootstrap peers")
    for peer in peers:
        try:
            parse_peer(peer)
        except ValueError as err:
            raise ServecapError("bootstrap_peer", peer, str(err)) from None


def _check_ports_free(host: str, port: int, replicas: int) -> None:
    """Every port is free before any replica starts (so none is left running alone)."""
    import socket

    from servecap.errors import ServecapError

    for p in range(port, port + replicas):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind((host, p))
            except OSError as err:
                raise ServecapError("port", p, f"is not free on {host} ({err.strerror})") from None
