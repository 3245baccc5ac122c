"""One autoscaler decision as answers carry it (``fleet simulate``, ``monitor replay``)."""

from __future__ import annotations

from typing_extensions import TypedDict

ScaleEvent = TypedDict("ScaleEvent", {"time_s": float, "pool": str, "from": int, "to": int})
"""At ``time_s`` the pool ``pool`` went from ``from`` replicas to ``to`` (``from`` is a Python
keyword, hence the functional form)."""

__all__ = ["ScaleEvent"]
