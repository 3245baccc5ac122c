"""The executor on a Ray cluster: a local one it starts, or one at an address.

Each item becomes one Ray task (``ray.remote``) with Ray's own retry of tasks whose worker died
(``max_retries``); application exceptions are not retried (they would fail again). Results are
collected as they finish (``ray.wait``), so progress is live and a task that fails for good
costs only its own outcome. Ray is an optional dependency: ``pip install 'servecap[distributed]'``.
Ray's documentation: "Fault tolerance — tasks" (``max_retries``, ``retry_exceptions``).
"""

from __future__ import annotations

import ipaddress
import re
import socket
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from servecap.distributed.executor import WORKER_DIED, TaskOutcome, describe, report
from servecap.errors import ServecapError
from servecap.progress import ProgressFn

T = TypeVar("T")
R = TypeVar("R")


CONNECT_TIMEOUT_S = 10.0
"""The longest the executor waits to reach a Ray cluster (the TCP probe and ``ray.init``
together): an address with nothing behind it is refused in one line within this, never after
Ray's own retries (about 30 s) or a hang."""
PROBE_TIMEOUT_S = 3.0
"""The TCP probe of the address's host and port: a refused or unanswered connection ends here."""
_HOST_LABEL = re.compile(r"(?!-)[A-Za-z0-9-]{1,63}(?<!-)")
_HOST_PORT = re.compile(r"^(?P<host>\[[0-9A-Fa-f:.]+\]|[^:/\s\[\]@?#]+):(?P<port>[0-9]{1,5})$")


def parse_ray_address(address: str) -> tuple[str, int] | None:
    """The ``(host, port)`` a Ray address names, or None for ``auto``/``local`` (Ray finds the
    cluster itself); anything else than ``ray://HOST:PORT`` or a GCS address ``HOST:PORT`` (a
    host name, an IPv4 address or a bracketed IPv6 one; a port in 1-65535) is one error."""
    if address in ("auto", "local"):
        return None
    text = address.removeprefix("ray://")
    m = _HOST_PORT.match(text)
    why = "must be auto, local, ray://HOST:PORT (Ray Client) or HOST:PORT (the head's GCS)"
    if m is None:
        raise ServecapError("ray_address", address, why)
    host, port = m["host"], int(m["port"])
    if not 1 <= port <= 65535:
        raise ServecapError("ray_address", address, f"port {port} is not in 1-65535")
    if host.startswith("["):
        try:
            ipaddress.IPv6Address(host[1:-1])
        except ValueError:
            raise ServecapError("ray_address", address, f"{host} is not an IPv6 address") from None
        return host[1:-1], port
    if not all(_HOST_LABEL.fullmatch(label) for label in host.rstrip(".").split(".")) or len(host) > 253:
        raise ServecapError("ray_address", address, f"{host!r} is not a host name or an IP address; " + why)
    return host, port


def probe(address: str, host: str, port: int, timeout_s: float = PROBE_TIMEOUT_S) -> None:
    """Refuse, in one line, an address where nothing accepts a TCP connection."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            pass
    except socket.gaierror as err:
        raise ServecapError("ray_address", address, f"cannot resolve {host} ({err.strerror})") from None
    except TimeoutError:
        raise ServecapError("ray_address", address, f"no answer from {host}:{port} within {timeout_s:g} s") from None
    except OSError as err:
        raise ServecapError(
            "ray_address",
            address,
            f"nothing accepts connections at {host}:{port} ({err.strerror or err}): is Ray running?",
        ) from None


def speaks_grpc(address: str, host: str, port: int, timeout_s: float = PROBE_TIMEOUT_S) -> None:
    """Refuse an address whose listener does not complete a gRPC (HTTP/2) handshake within
    ``timeout_s``: Ray's head (its GCS, its client server) always does; ``ray.init`` would
    otherwise retry a silent listener for about 30 s. Skipped with TLS (``RAY_USE_TLS``)."""
    import os

    if os.environ.get("RAY_USE_TLS", "0").lower() in ("1", "true"):
        return
    try:
        import grpc
    except ImportError:  # Ray brings grpc; without it ray.init's own timeout applies
        return
    target = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    channel = grpc.insecure_channel(target)
    try:
        grpc.channel_ready_future(channel).result(timeout=timeout_s)
    except grpc.FutureTimeoutError:
        raise ServecapError(
            "ray_address", address, f"{target} accepts connections but does not answer as Ray within {timeout_s:g} s"
        ) from None
    finally:
        channel.close()


def _import_ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise ServecapError("executor", "ray", "needs Ray: pip install 'servecap[distributed]'") from exc
    return ray


class RayExecutor:
    name = "ray"

    def __init__(self, address: str | None = None, *, num_cpus: int | None = None, max_retries: int = 1) -> None:
        if num_cpus is not None and num_cpus < 1:
            raise ServecapError("num_cpus", num_cpus, "must be at least 1")
        if max_retries < 0:
            raise ServecapError("max_retries", max_retries, "must be 0 or more")
        if address is not None:  # checked before any work: the form, then a TCP probe
            target = parse_ray_address(address)
            if target is not None:
                probe(address, *target)
        self.address = address
        self.num_cpus = num_cpus
        self.max_retries = max_retries
        self._started = False

    def _ensure_started(self) -> Any:
        ray = _import_ray()
        if ray.is_initialized():
            return ray
        kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "configure_logging": False}
        if self.address:
            kwargs["address"] = self.address
        elif self.num_cpus is not None:
            kwargs["num_cpus"] = self.num_cpus
        if self.address:
            target = parse_ray_address(self.address)
            if target is not None:
                speaks_grpc(self.address, *target)
        failure: list[BaseException] = []

        def connect() -> None:
            try:
                ray.init(**kwargs)
            except BaseException as exc:  # handed to the caller's thread
                failure.append(exc)

        t0 = time.monotonic()
        if not self.address:
            # a local instance starts in this thread: Ray's start of its own processes (signal
            # handlers, the GCS) needs the main thread, and nothing remote can leave it hanging
            connect()
        else:
            # a daemon thread: an address that never answers is given up on (the process can still exit)
            worker = threading.Thread(target=connect, name="ray-init", daemon=True)
            worker.start()
            worker.join(CONNECT_TIMEOUT_S)
        if self.address and worker.is_alive():
            raise ServecapError(
                "ray_address",
                self.address,
                f"Ray did not answer within {CONNECT_TIMEOUT_S:g} s (something else listens there, or the cluster is down)",
            )
        if failure:
            exc = failure[0]
            if not isinstance(exc, ConnectionError | RuntimeError | ValueError | TimeoutError):
                raise exc
            raise ServecapError(
                "ray_address",
                self.address or "local",
                f"cannot start or reach Ray after {time.monotonic() - t0:.1f} s: {describe(exc)}",
            ) from exc
        self._started = True
        return ray

    def map(
        self, fn: Callable[[T], R], items: Sequence[T], *, progress: ProgressFn | None = None
    ) -> list[TaskOutcome[R]]:
        ray = self._ensure_started()
        remote = ray.remote(max_retries=self.max_retries, retry_exceptions=False)(fn)
        index_of = {}
        for i, item in enumerate(items):
            index_of[remote.remote(item)] = i
        outcomes: dict[int, TaskOutcome[R]] = {}
        waiting = list(index_of)
        while waiting:
            ready, waiting = ray.wait(waiting, num_returns=1)
            for ref in ready:
                i = index_of[ref]
                outcomes[i] = self._collect(ray, ref, i)
            report(progress, len(outcomes), len(items), self.name)
        return [outcomes[i] for i in range(len(items))]

    def _collect(self, ray: Any, ref: Any, i: int) -> TaskOutcome[R]:
        try:
            return TaskOutcome(index=i, value=ray.get(ref))
        except (ray.exceptions.WorkerCrashedError, ray.exceptions.NodeDiedError, ray.exceptions.OutOfMemoryError):
            return TaskOutcome(index=i, error=WORKER_DIED, attempts=self.max_retries + 1)
        except ray.exceptions.RayTaskError as exc:
            cause = exc.cause if getattr(exc, "cause", None) is not None else exc
            return TaskOutcome(index=i, error=describe(cause))

    def close(self) -> None:
        if self._started:
            ray = _import_ray()
            ray.shutdown()
            self._started = False
