"""server/websocket_pacing.py: decoded bytes per loop turn, shared by connections, first come first served.

The attack it answers (compressed object-heavy messages on 20 connections) is crossed on a real server
in ``test_expansion_budgets.py``; here the budget's turns and order are pinned.
"""

from __future__ import annotations

import asyncio

from trtllm_responses.server.websocket_pacing import LoopBudget


def test_a_spent_budget_makes_everyone_wait_for_the_next_turn_in_order() -> None:
    async def go() -> list[tuple[int, str]]:
        budget = LoopBudget(per_turn=100)
        turn = 0
        log: list[tuple[int, str]] = []

        def connection(name: str, messages: int) -> None:
            """Decodes one 100-byte message a turn (the budget allows one), ``messages`` times."""
            left = messages

            def resume() -> None:
                nonlocal left
                while left:
                    if budget.spent():
                        budget.wait(resume)
                        return
                    budget.charge(100)
                    log.append((turn, name))
                    left -= 1

            if budget.busy():
                budget.wait(resume)
            else:
                resume()

        async def count_turns() -> None:
            nonlocal turn
            for _ in range(10):  # started first: each loop turn it counts runs before the budget's refill
                turn += 1
                await asyncio.sleep(0)

        counter = asyncio.ensure_future(count_turns())
        connection("a", 2)  # its first message spends the turn: its second waits, first in line
        connection("b", 2)  # arrives after: waits behind a
        connection("c", 1)
        await counter
        return log

    log = asyncio.run(go())
    # b's second message waited again after its first, so it goes behind c.
    assert [name for _, name in log] == ["a", "a", "b", "c", "b"]
    turns = [t for t, _ in log]
    assert turns == sorted(turns) and len(set(turns)) == len(turns)  # one message per turn


def test_within_the_budget_nothing_waits() -> None:
    async def go() -> bool:
        budget = LoopBudget(per_turn=1000)
        budget.charge(10)
        return budget.busy()

    assert asyncio.run(go()) is False
