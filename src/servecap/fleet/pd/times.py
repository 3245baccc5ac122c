"""The pieces of each finished request's TTFT in a P/D fleet, as columns (a plain frozen
dataclass kept apart from :mod:`servecap.fleet.pd.fleet`, which may be compiled by mypyc)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, slots=True)
class PdTimes:
    """Per finished request, the pieces of its TTFT (seconds; columns in request-id order of
    the requests that finished): arrival to the prefill's end (queue + prefill), the prefill's
    end to the KV landing (waiting for room on the decode side + the link's queue + the
    transfer), and the KV landing to the first token (the decode side's queue and step)."""

    request_id: np.ndarray
    prefill_s: np.ndarray
    wait_for_room_s: np.ndarray
    link_queue_s: np.ndarray
    transfer_s: np.ndarray
    decode_first_s: np.ndarray
    kv_bytes: np.ndarray
