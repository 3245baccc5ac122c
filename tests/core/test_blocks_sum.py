"""The closed-form sum of pages held over a range of lengths equals the sum it replaces."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from servecap.core.blocks import KvGroup, KvLayout
from servecap.specs.model import AttentionKind

GROUPS = st.one_of(
    st.builds(KvGroup, st.sampled_from([AttentionKind.FULL, AttentionKind.MLA]), st.none(), st.integers(1, 80)),
    st.builds(KvGroup, st.just(AttentionKind.SLIDING), st.integers(1, 9000), st.integers(1, 80)),
    st.builds(KvGroup, st.just(AttentionKind.MAMBA), st.none(), st.integers(1, 80)),
)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(group=GROUPS, block=st.sampled_from([1, 16, 64, 528]), lo=st.integers(0, 20_000), n=st.integers(0, 600))
def test_pages_held_sum_equals_the_loop(group: KvGroup, block: int, lo: int, n: int) -> None:
    want = sum(group.pages_held(t, block) for t in range(lo, lo + n))
    assert group.pages_held_sum(lo, lo + n, block) == want


def test_layout_sum_by_hand() -> None:
    # one full-attention group, 16-token blocks: lengths 15..17 hold 1, 1, 2 blocks
    layout = KvLayout(16, 1, 1, (KvGroup(AttentionKind.FULL, None, 32),))
    assert layout.blocks_held_sum(15, 18) == 4
    # a 32-token window caps a sliding group at cdiv(31, 16) + 1 = 3 pages: 100..101 -> 3 + 3
    sliding = KvLayout(16, 1, 1, (KvGroup(AttentionKind.SLIDING, 32, 4),))
    assert sliding.blocks_held_sum(100, 102) == 6
