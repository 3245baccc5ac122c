"""One request of a workload, as both the simulator and the load generator see it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Protocol

from servecap.workload.block_hash import HashBlocks, KeyRuns


@dataclass(frozen=True, slots=True)
class RequestSpec:
    """A request to send at ``arrival_s`` (seconds from the start of the run).

    The prompt is laid out as ``[shared prefix][conversation history][new tokens]``:

    - ``prefix_tokens`` tokens of the shared prefix ``prefix_group`` (a system prompt shared by
      every request of the group; 0 and ``None`` when there is none);
    - ``history_tokens`` tokens of the conversation's earlier turns (prompts and answers; closed
      loop only, 0 otherwise) — the same tokens the previous turn of ``conversation_id`` held;
    - the rest is new. ``prompt_tokens`` counts all three.

    ``user_id`` and ``turn`` (1-based within a conversation) identify closed-loop turns; an open
    loop request has ``user_id=None`` and ``turn=1``.

    Traffic mixes (docs/workload.md, "Tenants and classes") also set ``tenant`` and
    ``request_class`` (names), ``session_id`` (the user/session a session-affinity router hashes
    on) and ``duplicate_group`` (requests with the same id are exact repeats of one another: what
    an exact-match response cache can answer). All default to ``None``.
    """

    request_id: int
    arrival_s: float
    prompt_tokens: int
    output_tokens: int
    prefix_group: int | None = None
    prefix_tokens: int = 0
    user_id: int | None = None
    turn: int = 1
    history_tokens: int = 0
    conversation_id: int | None = None
    priority: int = 0  # lower is served first under the "priority" scheduling policy
    tenant: str | None = None
    request_class: str | None = None
    session_id: int | None = None
    duplicate_group: int | None = None
    hash_blocks: HashBlocks | None = None  # a block-hash trace's prompt (servecap.workload.block_hash)

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.output_tokens

    def arriving_at(self, arrival_s: float) -> RequestSpec:
        """This request arriving at ``arrival_s`` instead (every other field kept)."""
        return replace(self, arrival_s=arrival_s)


def prefix_block_keys(req: RequestSpec, block_size: int) -> KeyRuns | None:
    """Keys of the request's KV blocks that another request may share, in order (None: none).

    A block's key stands for the whole token sequence up to the block's end (as vLLM's chained
    block hashes do), so equal keys mean equal content:

    - blocks wholly inside the shared prefix: block ``i`` of the run ``hash((0, prefix_group))``
      — shared by the group;
    - in a conversation, every later full block of prompt and answer: block ``i - p`` of the run
      ``hash((1, conversation_id))`` (``p`` the prefix's blocks, the same on every turn) — the
      next turn's prompt starts with exactly these tokens;
    - other blocks are unique to the request and get no key.

    As :class:`KeyRuns` (at most two runs: the pool handles a run in one operation).
    """
    return block_keys(
        prefix_group=req.prefix_group,
        prefix_tokens=req.prefix_tokens,
        conversation_id=req.conversation_id,
        total_tokens=req.total_tokens,
        block_size=block_size,
    )


class _Keyed(Protocol):
    @property
    def prompt_tokens(self) -> int: ...
    @property
    def output_tokens(self) -> int: ...
    @property
    def prefix_group(self) -> int | None: ...
    @property
    def prefix_tokens(self) -> int: ...
    @property
    def conversation_id(self) -> int | None: ...
    @property
    def hash_blocks(self) -> HashBlocks | None: ...


def request_block_keys(req: _Keyed, block_size: int) -> Sequence[int] | None:
    """The keys of an arriving request's shareable blocks: from its trace block hashes when it
    has them (:meth:`HashBlocks.keys`), else :func:`block_keys` of its prefix and conversation."""
    hb = req.hash_blocks
    if hb is not None:
        return hb.runs(block_size, req.prompt_tokens)
    if req.prefix_group is None and req.conversation_id is None:
        return None
    return block_keys(
        prefix_group=req.prefix_group,
        prefix_tokens=req.prefix_tokens,
        conversation_id=req.conversation_id,
        total_tokens=req.prompt_tokens + req.output_tokens,
        block_size=block_size,
    )


def block_keys(
    *,
    prefix_group: int | None,
    prefix_tokens: int,
    conversation_id: int | None,
    total_tokens: int,
    block_size: int,
) -> KeyRuns | None:
    """:func:`prefix_block_keys` from the fields themselves."""
    if block_size <= 0:
        raise ValueError("block_size must be positive")
    prefix_blocks = prefix_tokens // block_size if prefix_group is not None else 0
    if conversation_id is None:
        return _group_keys(prefix_group, prefix_blocks) if prefix_blocks else None
    n = total_tokens // block_size
    if n <= prefix_blocks:
        return _group_keys(prefix_group, prefix_blocks) if prefix_blocks else None
    own = hash((1, conversation_id))
    if not prefix_blocks:
        return KeyRuns((own,), (n,))
    return KeyRuns((hash((0, prefix_group)), own), (prefix_blocks, n))


@lru_cache(maxsize=4096)
def _group_keys(prefix_group: int | None, blocks: int) -> KeyRuns:
    """The keys of a shared prefix's first ``blocks`` blocks: one run, the same for every request
    of the group, so made once."""
    return KeyRuns((hash((0, prefix_group)),), (blocks,))
