"""``replicas_needed``: no demand needs no replica, whatever a replica serves (a deployment that
serves nothing is an error only when there is demand to carry)."""

from __future__ import annotations

import pytest

from servecap.core.cost import replicas_needed


def test_no_demand_needs_no_replica() -> None:
    assert replicas_needed(0, 675) == 0
    assert replicas_needed(0, 0) == 0  # nothing to carry: not an error
    assert replicas_needed(675, 675) == 1 and replicas_needed(676, 675) == 2
    with pytest.raises(ValueError, match="serves nothing"):
        replicas_needed(1, 0)
