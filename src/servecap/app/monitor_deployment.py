"""The deployment a monitored server says it runs: ``servecap emulate`` serves its own at
``GET /servecap/deployment`` (as ``servecap bench`` reads it), so ``monitor`` without deployment
flags gets the SLO headroom from the engine model rather than the KV pool's bound alone."""

from __future__ import annotations

from collections.abc import Sequence
from urllib.parse import urlsplit, urlunsplit

from servecap.errors import ServecapError
from servecap.specs.deployment import Deployment


def server_base(metrics_url: str) -> str:
    """``http://host:port/metrics`` -> ``http://host:port`` (the server's root); a URL that does
    not parse (``http://[::1``) is one line naming it."""
    try:
        parts = urlsplit(metrics_url)
    except ValueError as err:
        raise ServecapError("url", metrics_url, f"not a URL ({err})") from None
    return urlunsplit((parts.scheme, parts.netloc, "", "", ""))


def served_deployment(urls: Sequence[str], warnings: list[str]) -> tuple[Deployment, str] | None:
    """The first target's served deployment and where it came from; None when no target serves
    one (a real vLLM or SGLang server)."""
    from servecap.app.bench import server_deployment
    from servecap.app.runs import deployment_from_settings

    for url in urls:
        base = server_base(url)
        data = server_deployment(base, None, warnings)
        if data is not None:
            dep, _, _ = deployment_from_settings(data)
            return dep, f"{base}/servecap/deployment"
    return None
