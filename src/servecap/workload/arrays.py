"""An open-loop request stream as columns (what the simulators read; one row per request)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from servecap.workload.request import RequestSpec


@dataclass(frozen=True, slots=True)
class RequestArrays:
    """One row per request, sorted by arrival.

    The first five columns are always given. The traffic-mix columns default to "none" when left
    out: ``tenant`` and ``request_class`` are small int codes into ``tenant_names`` and
    ``class_names`` (-1: none); ``session_id`` and ``duplicate_group`` are ids (-1: none);
    ``priority`` is the scheduling priority (lower first, 0 by default).
    """

    arrival_s: NDArray[np.float64]
    prompt_tokens: NDArray[np.int64]
    output_tokens: NDArray[np.int64]
    prefix_group: NDArray[np.int64]  # -1: none
    prefix_tokens: NDArray[np.int64]
    tenant: NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    request_class: NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    session_id: NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    duplicate_group: NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    priority: NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    tenant_names: tuple[str, ...] = ()
    class_names: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        n = len(self.arrival_s)
        for name, fill in (("tenant", -1), ("request_class", -1), ("session_id", -1), ("duplicate_group", -1)):
            if len(getattr(self, name)) != n:
                object.__setattr__(self, name, np.full(n, fill, dtype=np.int64))
        if len(self.priority) != n:
            object.__setattr__(self, "priority", np.zeros(n, dtype=np.int64))

    def __len__(self) -> int:
        return len(self.arrival_s)

    def tenant_of(self, i: int) -> str | None:
        """The tenant name of row ``i`` (None: none)."""
        code = int(self.tenant[i])
        return None if code < 0 else self.tenant_names[code]

    def class_of(self, i: int) -> str | None:
        """The class name of row ``i`` (None: none)."""
        code = int(self.request_class[i])
        return None if code < 0 else self.class_names[code]

    def take(self, idx: NDArray[np.int64]) -> RequestArrays:
        """The rows ``idx`` (in that order), name tables kept."""
        return RequestArrays(
            self.arrival_s[idx],
            self.prompt_tokens[idx],
            self.output_tokens[idx],
            self.prefix_group[idx],
            self.prefix_tokens[idx],
            self.tenant[idx],
            self.request_class[idx],
            self.session_id[idx],
            self.duplicate_group[idx],
            self.priority[idx],
            self.tenant_names,
            self.class_names,
        )

    def to_requests(self) -> list[RequestSpec]:
        tenants: list[str | None] = [None if c < 0 else self.tenant_names[c] for c in self.tenant.tolist()]
        classes: list[str | None] = [None if c < 0 else self.class_names[c] for c in self.request_class.tolist()]
        return [
            RequestSpec(
                request_id=i,
                arrival_s=a,
                prompt_tokens=p,
                output_tokens=o,
                prefix_group=None if g < 0 else g,
                prefix_tokens=t if g >= 0 else 0,
                priority=pr,
                tenant=tn,
                request_class=cl,
                session_id=None if s < 0 else s,
                duplicate_group=None if d < 0 else d,
            )
            for i, (a, p, o, g, t, pr, tn, cl, s, d) in enumerate(
                zip(
                    self.arrival_s.tolist(),
                    self.prompt_tokens.tolist(),
                    self.output_tokens.tolist(),
                    self.prefix_group.tolist(),
                    self.prefix_tokens.tolist(),
                    self.priority.tolist(),
                    tenants,
                    classes,
                    self.session_id.tolist(),
                    self.duplicate_group.tolist(),
                    strict=True,
                )
            )
        ]
