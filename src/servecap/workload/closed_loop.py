"""Closed loop: N users in conversations; each turn waits for the previous answer plus a think.

Each user draws from a child generator of its own (``rng.spawn``), so a user's conversations
(turn counts, lengths, think times) do not depend on when other users' answers finish: a
simulated and a measured run of one spec and seed send the same turns, only at the times their
servers allow. Request ids are handed out in call order.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from servecap.workload.dists import AnyDist, mean, sample_one, sample_token_one
from servecap.workload.popularity import draw_popular
from servecap.workload.request import RequestSpec
from servecap.workload.spec import PrefixSpec, UsersSpec, WorkloadSpec

CONVERSATIONS_PER_USER = 1_000_000  # conversation_id = user_id x this + k


@dataclass(slots=True)
class _User:
    rng: np.random.Generator
    conversations: int = 0
    conversation_id: int = -1
    turn: int = 0
    turns_left: int = 0
    history_tokens: int = 0
    prefix_group: int | None = None
    prefix_tokens: int = 0


class ClosedLoopUsers:
    """Hands out each user's turns: :meth:`first_turns`, then :meth:`next_turn` per answer."""

    def __init__(self, spec: WorkloadSpec, rng: np.random.Generator) -> None:
        if spec.users is None:
            raise ValueError("not a closed-loop workload")
        assert spec.prompt_tokens is not None and spec.output_tokens is not None
        self.spec = spec
        self.users_spec: UsersSpec = spec.users
        self._prompt: AnyDist = spec.prompt_tokens
        self._output: AnyDist = spec.output_tokens
        self._prefix: PrefixSpec | None = spec.prefix
        n = spec.users.count
        spread = spec.users.start_spread_s
        if spread is None:
            spread = mean(spec.users.think_time_s)
        self._starts = rng.uniform(0.0, spread, n) if spread > 0 else np.zeros(n)
        self._users = [_User(child) for child in rng.spawn(n)]
        self._next_id = 0
        self.issued = 0

    @property
    def num_users(self) -> int:
        return len(self._users)

    def mean_think_time_s(self) -> float:
        return mean(self.users_spec.think_time_s)

    def first_turns(self) -> list[RequestSpec]:
        """Every user's first turn, in user order (times = the users' start offsets)."""
        out = []
        for uid in range(len(self._users)):
            req = self._turn(uid, float(self._starts[uid]))
            if req is not None:
                out.append(req)
        return out

    def next_turn(self, user_id: int, finished_at_s: float) -> RequestSpec | None:
        """The user's next turn after the answer that finished at ``finished_at_s``, or None when
        the run is over (``num_requests`` issued or the turn would arrive at/after ``duration_s``).
        """
        user = self._users[user_id]
        think = sample_one(self.users_spec.think_time_s, user.rng)
        return self._turn(user_id, finished_at_s + think)

    def _turn(self, uid: int, at_s: float) -> RequestSpec | None:
        spec = self.spec
        if spec.num_requests is not None and self.issued >= spec.num_requests:
            return None
        if spec.duration_s is not None and at_s >= spec.duration_s:
            return None
        user = self._users[uid]
        new = sample_token_one(self._prompt, user.rng)
        out = sample_token_one(self._output, user.rng)
        too_long = user.prefix_tokens + user.history_tokens + new + out > self.users_spec.max_context_tokens
        if user.turns_left <= 0 or too_long:
            self._new_conversation(uid, user)
        user.turn += 1
        user.turns_left -= 1
        req = RequestSpec(
            request_id=self._next_id,
            arrival_s=at_s,
            prompt_tokens=user.prefix_tokens + user.history_tokens + new,
            output_tokens=out,
            prefix_group=user.prefix_group,
            prefix_tokens=user.prefix_tokens,
            user_id=uid,
            turn=user.turn,
            history_tokens=user.history_tokens,
            conversation_id=user.conversation_id,
        )
        user.history_tokens += new + out
        self._next_id += 1
        self.issued += 1
        return req

    def _new_conversation(self, uid: int, user: _User) -> None:
        user.conversation_id = uid * CONVERSATIONS_PER_USER + user.conversations
        user.conversations += 1
        user.turn = 0
        user.turns_left = max(1, sample_token_one(self.users_spec.turns, user.rng))
        user.history_tokens = 0
        user.prefix_group, user.prefix_tokens = None, 0
        if self._prefix is not None and user.rng.uniform() < self._prefix.share:
            if self._prefix.zipf_s == 0:
                user.prefix_group = int(user.rng.integers(0, self._prefix.groups))
            else:
                user.prefix_group = int(draw_popular(user.rng, self._prefix.groups, self._prefix.zipf_s, 1)[0])
            user.prefix_tokens = self._prefix.tokens
