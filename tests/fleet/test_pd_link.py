"""The KV link as a resource: a transfer holds its two NICs for its occupancy, at the earliest
time both are free; the NICs wait for each other, not for the rest of the fleet's queues."""

from __future__ import annotations

from servecap.fleet.pd.link import KvLink, book_transfer


def test_a_transfer_takes_the_gap_both_its_links_leave() -> None:
    p1, p2, d1, d2 = (KvLink(n, 1.0) for n in ("P1", "P2", "D1", "D2"))
    assert book_transfer((p1, d1), 0.0, 1.0, 1.0) == 0.0  # [0, 1) on P1 and D1
    assert book_transfer((p2, d1), 0.0, 1.0, 1.0) == 1.0  # D1 is busy until 1: [1, 2) on P2 and D1
    assert book_transfer((p1, d2), 0.5, 1.0, 1.0) == 1.0  # P1 is busy until 1: [1, 2) on P1 and D2
    # P2 and D2 are both free over [0, 1): the transfer starts at once. (Were each link only its
    # end of last booking, it would start at 2, behind P1 -> D1 through two other transfers.)
    assert book_transfer((p2, d2), 0.0, 1.0, 1.0) == 0.0
    # a transfer longer than the gap goes after the spans
    assert book_transfer((p2, d2), 0.0, 1.5, 1.0) == 2.0
    assert (p2.queued_s, d2.queued_s) == (1.0 + 0.0 + 2.0, 0.5 + 0.0 + 2.0)


def test_one_link_is_first_come_first_served() -> None:
    link = KvLink("shared", 1.0, keep_log=True)
    starts = [book_transfer((link,), t, 1.0, 1.0) for t in (0.0, 0.2, 0.4, 5.0, 5.1)]
    assert starts == [0.0, 1.0, 2.0, 5.0, 6.0]
    assert link.busy_s == 5.0 and link.transfers == 5


def test_earliest_free_by_hand() -> None:
    link = KvLink("L", 1.0)
    link.book(1.0, 2.0, 1.0)
    link.book(3.0, 4.0, 1.0)
    assert link.earliest_free_s(0.0, 1.0) == 0.0  # [0, 1) fits before the first span
    assert link.earliest_free_s(0.5, 1.0) == 2.0  # [0.5, 1.5) does not: after it, [2, 3) fits
    assert link.earliest_free_s(1.5, 1.5) == 4.0  # under way at 1.5; [2, 3.5) hits the second
    assert link.earliest_free_s(4.0, 9.0) == 4.0
