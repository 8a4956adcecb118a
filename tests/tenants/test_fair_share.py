"""The fair share of a full engine (``tenants/admission.py``): weights, tiers, bounds, a turn that leaves.

Pure state, driven as the gate drives it: ``arrive`` (runs now or waits), ``leave`` (a turn ended or gave
its place up) and the turns each freed slot admits (docs/tenants.md#fair-share).
"""

from __future__ import annotations

import pytest

from trtllm_responses.tenants import EngineFull, FairShare, Ticket


def tickets(
    share: FairShare, tenant: str, count: int, *, weight: float = 1.0, tier: str = "default"
) -> list[Ticket]:
    made = [Ticket(tenant, weight, tier) for _ in range(count)]
    for ticket in made:
        share.arrive(ticket)
    return made


def drain(share: FairShare, running: list[Ticket]) -> list[str]:
    """End running turns one at a time, oldest first; the tenants of the turns admitted, in order."""
    order = []
    while running:
        admitted = share.leave(running.pop(0))
        order += [t.tenant for t in admitted]
        running += admitted
    return order


def test_no_capacity_means_no_queue() -> None:
    share = FairShare(capacity=0)
    assert all(t.running for t in tickets(share, "a", 100))
    assert share.total_waiting == 0


def test_a_flooding_tenant_waits_behind_another_tenants_first_turn() -> None:
    share = FairShare(capacity=1)
    flood = tickets(share, "a", 10)
    assert [t.running for t in flood[:2]] == [True, False]
    late = tickets(share, "b", 2)
    assert not late[0].running
    # The first slot freed goes to b (no turn started yet) before a's nine waiting turns, then they alternate.
    order = drain(share, [flood[0]])
    assert order[:4] == ["b", "a", "b", "a"]


def test_an_idle_tenant_banks_no_credit() -> None:
    """A tenant that started nothing for a while is not owed the slots it did not use: it starts at the pass
    of the last turn started, then takes turns with the busy one."""
    share = FairShare(capacity=1)
    first = tickets(share, "a", 1)[0]
    running = [first]
    for _ in range(20):  # a alone: twenty turns, one after another
        running += tickets(share, "a", 1)
        share.leave(running.pop(0))
    tickets(share, "a", 4)
    tickets(share, "b", 4)
    assert drain(share, running)[:6] == ["b", "a", "b", "a", "b", "a"]


def test_weights_share_the_slots() -> None:
    share = FairShare(capacity=4)
    running = tickets(share, "warm", 4)  # every slot taken before the others arrive
    tickets(share, "heavy", 30, weight=3)
    tickets(share, "light", 30, weight=1)
    order = drain(share, running)[:40]
    assert abs(order.count("heavy") - 3 * order.count("light")) <= 2, order


def test_tiers_order_a_tenants_own_turns() -> None:
    share = FairShare(capacity=1)
    first = tickets(share, "a", 1)[0]
    flex = tickets(share, "a", 1, tier="flex")[0]
    default = tickets(share, "a", 1)[0]
    priority = tickets(share, "a", 1, tier="priority")[0]
    assert share.leave(first) == [priority]
    assert share.leave(priority) == [default]
    assert share.leave(default) == [flex]


def test_tiers_do_not_cross_tenants() -> None:
    """A tenant's ``priority`` turn goes before its own ``default`` ones, not before another tenant's
    fair turn."""
    share = FairShare(capacity=1)
    first = tickets(share, "a", 1)[0]
    b_turn = tickets(share, "b", 1)[0]
    a_priority = tickets(share, "a", 1, tier="priority")[0]
    assert share.leave(first) == [b_turn]
    assert share.leave(b_turn) == [a_priority]


def test_the_queue_is_bounded() -> None:
    share = FairShare(capacity=1, max_waiting=2)
    tickets(share, "a", 3)
    with pytest.raises(EngineFull) as refused:
        share.arrive(Ticket("b"))
    assert refused.value.status_code == 429
    assert refused.value.to_dict()["error"]["code"] == "rate_limit_exceeded"
    assert refused.value.error_type == "requests"


def test_a_turn_that_leaves_while_waiting_frees_its_place() -> None:
    share = FairShare(capacity=1, max_waiting=2)
    first, gone, kept = tickets(share, "a", 3)
    assert share.leave(gone) == []  # a waiting turn leaving admits nobody: no slot was freed
    assert share.total_waiting == 1 and share.waiting("a") == 1
    later = Ticket("a")
    share.arrive(later)  # its place is free again
    assert share.leave(first) == [kept]  # the withdrawn turn is skipped, never run
    assert share.leave(kept) == [later]
    assert not gone.running
    assert share.leave(gone) == []  # leaving twice changes nothing


def test_running_counts_return_to_zero() -> None:
    share = FairShare(capacity=3)
    running = tickets(share, "a", 5) + tickets(share, "b", 5)
    drain(share, [t for t in running if t.running])
    assert share.total_running == 0 and share.total_waiting == 0 and share.running == {}
