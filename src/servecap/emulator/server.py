"""Running the emulator: the engine from a deployment (or a fixed-latency reference), and a
uvicorn server in this process or in a background thread (tests, benchmarks)."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import threading
import time
from contextlib import suppress
from typing import TYPE_CHECKING, Any

from servecap.emulator.app import EmulatorState, build_state, create_app
from servecap.emulator.engine_port import PrefixKey
from servecap.emulator.fixed import FixedDelayEngine
from servecap.emulator.read_deadline import REQUEST_READ_TIMEOUT_S, read_deadline_protocol
from servecap.sim.engine_types import EngineRequest, EngineStats, StepOutcome

if TYPE_CHECKING:
    from servecap.sim.engine import Engine


class SimEngineAdapter:
    """:class:`servecap.sim.Engine` as the driver's
    :class:`~servecap.emulator.engine_port.EmulatedEngine`, stepped back to back.

    After each step it drains ``take_finished()`` (the engine keeps every finished request
    there until asked: a long-running server must ask) and reports, for each request that
    finished in the step, the prompt tokens it found in the prefix cache (its
    ``cached_prompt_tokens``, carried by the final usage chunk) and when it was first scheduled
    (its ``scheduled_s``, for the queue/prefill/inference histograms). Otherwise only the
    engine's public API is used (``add_request``, ``add_transferred``, ``has_work``, ``step``,
    ``take_finished``, ``abort``, ``stats``).
    """

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._hits: dict[int, int] = {}
        self._sched: dict[int, float] = {}
        # speculative decoding: each request's token bursts, in order, and the draft length
        self.spec_bursts: dict[int, list[int]] = engine.spec_bursts
        self.spec_k = len(engine.setup.spec_acceptance)

    def add(self, request_id: int, prompt_tokens: int, output_tokens: int, prefix_key: PrefixKey, now_s: float) -> bool:
        return self.engine.add_request(EngineRequest(request_id, prompt_tokens, output_tokens, prefix_key), now_s)

    def add_transferred(self, request_id: int, prompt_tokens: int, output_tokens: int, now_s: float) -> bool:
        return self.engine.add_transferred(request_id, prompt_tokens, output_tokens, now_s)

    def has_work(self) -> bool:
        return self.engine.has_work()

    def step(self, now_s: float) -> StepOutcome:
        out = self.engine.step(now_s)
        done = self.engine.take_finished()
        if done:
            self._hits = {r.request_id: r.cached_prompt_tokens for r in done}
            self._sched = {r.request_id: r.scheduled_s for r in done if r.scheduled_s is not None}
        else:
            self._hits, self._sched = {}, {}
        return out

    def next_event_s(self) -> float | None:
        """None: the driver lays the engine's steps back to back."""
        return None

    def abort(self, request_id: int) -> bool:
        return self.engine.abort(request_id)

    @property
    def stats(self) -> EngineStats:
        return self.engine.stats

    def cached_tokens(self) -> dict[int, int]:
        return self._hits

    def scheduled_times(self) -> dict[int, float]:
        return self._sched


def engine_state(
    plan: Any,
    *,
    model_name: str,
    enable_prefix_caching: bool = True,
    waiting_queue_limit: int | None = None,
    deployment_options: dict[str, Any] | None = None,
    enable_control_endpoints: bool = False,
    request_overhead_s: float | None = None,
    role: str = "both",
    kv_link: str = "infiniband",
    pd_secret: str | None = None,
    bootstrap_peers: tuple[str, ...] = (),
) -> EmulatorState:
    """State around :class:`servecap.sim.Engine` for one planned replica (same code as simulate).

    ``request_overhead_s``: the per-request server cost charged before the engine sees a request
    (default: the plan's ``Efficiency.request_overhead_s`` less the emulator's own HTTP path,
    :func:`servecap.emulator.driver.request_overhead_remainder_s`), so that TTFT matches simulate.

    ``deployment_options``: the ``servecap emulate`` flags that built ``plan`` (served at
    ``GET /servecap/deployment`` so ``servecap bench`` can store them with its runs). Prompt
    token ids are checked against the model's vocabulary; ``vllm:cache_config_info`` carries
    the replica's block size, KV dtype (vLLM's ``auto`` for the model's own 16-bit type),
    prefix caching, memory utilization and KV block count.

    ``pd_secret``: the secret a P/D pair shares (None: this process's own, for pairs in one
    process); ``bootstrap_peers``: ``HOST:PORT`` of the only prefill servers a decode server
    fetches from (empty: any validated host and port)."""
    from servecap.emulator.driver import request_overhead_remainder_s
    from servecap.sim.engine import Engine
    from servecap.sim.setup import engine_setup_from_plan

    setup = engine_setup_from_plan(
        plan, enable_prefix_caching=enable_prefix_caching, waiting_queue_limit=waiting_queue_limit
    )
    engine = SimEngineAdapter(Engine(setup, keep_spec_bursts=bool(setup.spec_acceptance)))

    dep = plan.deployment
    cache_config = {
        "block_size": str(plan.layout.block_size),
        "cache_dtype": "auto" if dep.kv_dtype.name in ("bf16", "fp16", "fp32") else dep.kv_dtype.name,
        "enable_prefix_caching": str(bool(setup.enable_prefix_caching)),
        "gpu_memory_utilization": str(dep.engine.gpu_memory_utilization),
        "num_gpu_blocks": str(setup.num_gpu_blocks),
        "engine": "0",
    }
    state = build_state(
        engine,
        model_name=model_name,
        max_model_len=dep.engine.max_model_len,
        block_size=plan.layout.block_size,
        vocab_size=dep.model.vocab_size,
        cache_config=cache_config,
        enable_control_endpoints=enable_control_endpoints,
        request_overhead_s=(
            request_overhead_remainder_s(plan.efficiency.request_overhead_s)
            if request_overhead_s is None
            else request_overhead_s
        ),
    )
    if deployment_options is not None:
        state.deployment = {**deployment_options, "enable_prefix_caching": setup.enable_prefix_caching}
    if role != "both":
        from servecap.core.kv_transfer import kv_footprint
        from servecap.emulator.pd import PdRole
        from servecap.fleet.pd_spec import KvLinkSpec

        kv = kv_footprint(dep.model, dep.parallelism.tp, dep.kv_dtype, dep.gpu.hbm_bandwidth_tb_s * 1e12)
        from servecap.emulator.pd import PROCESS_SECRET, parse_peer

        peers = frozenset(parse_peer(p) for p in bootstrap_peers) if bootstrap_peers else None
        secret = PROCESS_SECRET if pd_secret is None else pd_secret
        state.pd = PdRole(role, engine.engine, kv, KvLinkSpec(kind=kv_link), secret=secret, peers=peers)
    return state


def fixed_state(
    ttft_s: float,
    itl_s: float,
    *,
    model_name: str,
    max_model_len: int = 1 << 20,
    enable_control_endpoints: bool = False,
) -> EmulatorState:
    engine = FixedDelayEngine(ttft_s, itl_s)
    return build_state(
        engine,
        model_name=model_name,
        max_model_len=max_model_len,
        block_size=16,
        enable_control_endpoints=enable_control_endpoints,
    )


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def free_ports(n: int, host: str = "127.0.0.1") -> int:
    """The first of ``n`` consecutive ports free on ``host`` now (for ``emulate --replicas``)."""
    for _ in range(100):
        base = free_port(host)
        if base + n - 1 > 65535:
            continue
        try:
            for p in range(base + 1, base + n):
                with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                    s.bind((host, p))
        except OSError:
            continue
        return base
    raise RuntimeError(f"no {n} consecutive free ports on {host}")


def uvicorn_config(
    state: EmulatorState, host: str, port: int, *, request_read_timeout_s: float = REQUEST_READ_TIMEOUT_S, **kw: Any
) -> Any:
    """uvicorn's configuration for the emulator: each request must arrive whole within
    ``request_read_timeout_s`` (see :mod:`servecap.emulator.read_deadline`)."""
    import uvicorn

    protocol = read_deadline_protocol(request_read_timeout_s)
    if protocol is not None:
        kw.setdefault("http", protocol)
    return uvicorn.Config(
        create_app(state),
        host=host,
        port=port,
        log_level="warning",
        access_log=False,
        timeout_keep_alive=30,
        backlog=4096,
        lifespan="on",
        **kw,
    )


class ServerThread:
    """A real uvicorn server on ``host:port`` in a daemon thread (its own event loop)."""

    def __init__(
        self,
        state: EmulatorState,
        host: str = "127.0.0.1",
        port: int | None = None,
        *,
        request_read_timeout_s: float = REQUEST_READ_TIMEOUT_S,
    ) -> None:
        import uvicorn

        self.state, self.host = state, host
        self.port = port or free_port(host)
        self.server = uvicorn.Server(
            uvicorn_config(state, host, self.port, request_read_timeout_s=request_read_timeout_s)
        )
        self.thread = threading.Thread(target=self._run, daemon=True)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def _run(self) -> None:
        asyncio.run(self._serve())

    async def _serve(self) -> None:
        try:
            await self.server.serve()
        finally:
            await self.state.driver.stop()

    def __enter__(self) -> ServerThread:
        self.thread.start()
        deadline = time.monotonic() + 10.0
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError(f"emulator did not start on {self.url}")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10.0)


def stop_process_group(proc: subprocess.Popen[bytes], timeout_s: float = 10.0) -> None:
    """Stop a child started with ``start_new_session=True`` (a router or gateway in front of
    emulator replicas, with whatever workers it spawned): SIGTERM to its process group, SIGKILL
    after ``timeout_s``; a group already gone is fine."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        proc.wait()
        return
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        with suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


class ServerProcess:
    """``servecap emulate ARGS`` in a child process on a free 127.0.0.1 port (no shared GIL with
    the client); waits for /health, terminates it on exit. A harness for tests and benchmarks
    on loopback, so its control endpoints are on unless ``control_endpoints=False``.
    ``replicas``: ``emulate --replicas N`` on N consecutive free ports (:attr:`urls`); exit
    stops the parent, which stops every replica."""

    def __init__(
        self,
        args: list[str],
        host: str = "127.0.0.1",
        start_timeout_s: float = 60.0,
        *,
        control_endpoints: bool = True,
        replicas: int = 1,
    ) -> None:
        self.host, self.replicas = host, replicas
        self.port = free_port(host) if replicas == 1 else free_ports(replicas, host)
        self.args = [*args, "--enable-control-endpoints"] if control_endpoints else list(args)
        if replicas > 1:
            self.args += ["--replicas", str(replicas)]
        self.start_timeout_s = start_timeout_s
        self.proc: Any = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def urls(self) -> list[str]:
        return [f"http://{self.host}:{self.port + i}" for i in range(self.replicas)]

    def __enter__(self) -> ServerProcess:
        import subprocess
        import sys
        import urllib.request

        self.proc = subprocess.Popen(
            [sys.executable, "-m", "servecap", "emulate", *self.args, "--host", self.host, "--port", str(self.port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + self.start_timeout_s
        waiting = list(self.urls)
        while waiting:
            if self.proc.poll() is not None:
                err = self.proc.stderr.read().decode(errors="replace") if self.proc.stderr else ""
                raise RuntimeError(f"emulator exited with {self.proc.returncode}: {err[-2000:]}")
            try:
                with urllib.request.urlopen(waiting[0] + "/health", timeout=1.0):
                    waiting.pop(0)
            except OSError:
                if time.monotonic() > deadline:
                    self.__exit__()
                    raise RuntimeError(f"emulator did not answer on {waiting[0]}") from None
                time.sleep(0.05)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10.0)
            except Exception:
                self.proc.kill()
                self.proc.wait()
        if self.proc is not None and self.proc.stderr is not None:
            self.proc.stderr.close()
