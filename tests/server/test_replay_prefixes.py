"""A stateless agent's replayed session through a real server and the openai SDK (``store: false``, the
whole history every turn, encrypted reasoning included): decoded by what is new from its second large turn
on (``request/replay_prefix.py``), answering what a server that parses every body whole answers, and
counted in ``/stats``."""

from __future__ import annotations

from typing import Any

import httpx
import openai
from support.server_harness import ServerFactory

AGENTS_MD = "\n".join(
    f"{i}. Keep changes small and run the tests that cover them (rule {i})." for i in range(1200)
)


def session(base_url: str, turns: int) -> list[dict[str, Any]]:
    """Each turn's response (as JSON) to the whole history so far: Codex's way, with the openai SDK."""
    with openai.OpenAI(base_url=f"{base_url}/v1", api_key="unused", max_retries=0) as client:
        history: list[Any] = [{"role": "user", "content": AGENTS_MD}]
        answers = []
        for turn in range(turns):
            history.append({"role": "user", "content": f"turn {turn}: #lorem 24"})
            response = client.responses.create(
                model="gpt-oss-test",
                input=history,
                store=False,
                include=["reasoning.encrypted_content"],
                reasoning={"effort": "low"},
            )
            answers.append(response.model_dump(include={"output", "usage", "status"}))
            history += [item.model_dump(exclude_none=True) for item in response.output]
        return answers


def stats(base_url: str) -> dict[str, Any]:
    caches: dict[str, Any] = httpx.get(f"{base_url}/stats", timeout=10).json()["caches"]
    return caches


def test_a_replayed_session_is_decoded_by_what_is_new_and_answered_alike(serve: ServerFactory) -> None:
    assert len(AGENTS_MD) > 64 << 10  # every body is large enough to be remembered
    with serve() as running:
        remembered = session(running.base_url, 5)
        caches = stats(running.base_url)
    with serve(replay_prefix_bytes=0) as running:
        whole = session(running.base_url, 5)
        assert stats(running.base_url)["replay_prefixes"] is None

    def seen(answers: list[dict[str, Any]]) -> list[Any]:  # what differs by run: ids and sealed blobs
        return [
            (a["status"], a["usage"]["input_tokens"], [(o["type"], o.get("content")) for o in a["output"]])
            for a in answers
        ]

    assert seen(remembered) == seen(whole)
    prefixes = caches["replay_prefixes"]
    assert prefixes["hits"] == 4  # turns 2-5 each repeat the turn before
    assert prefixes["reused_items"] >= 2 + 4 + 6 + 8  # the history's items, taken as they were
    assert prefixes["entries"] == 1  # each turn's entry replaced the last (it repeats all of it)
    assert 0 < prefixes["bytes"] <= prefixes["max_bytes"]
    assert caches["rendered_items"]["hits"] > 0
