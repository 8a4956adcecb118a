"""One conversation stays within ``--max_store_bytes`` on every backend (issue 30, point 4).

Before: the memory store evicted other conversations to make room for the one being written but never
bounded that one: one conversation held 306 MB under a 100 MB bound (only the 10,000-item cap applied).
Adding items, creating with items and a turn's input are now refused (400 ``conversation_too_large``)
past the bound, before anything is stored or generated.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from support.server_harness import ServerFactory

from trtllm_responses.responses.conversations import ITEM_OVERHEAD_BYTES
from trtllm_responses.store import open_store

BOUND = 1 << 20  # --max_store_bytes
ITEM_TEXT = 100_000


@pytest.fixture(params=["memory", "sqlite", "redis"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "memory":
        return "memory"
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'store.db'}"
    redis = request.getfixturevalue("redis_server")
    return redis.url


def _item(i: int) -> dict[str, object]:
    return {
        "type": "message",
        "role": "user",
        "content": [{"type": "input_text", "text": f"{i:06d}" + "x" * ITEM_TEXT}],
    }


def test_a_conversation_stays_within_max_store_bytes(serve: ServerFactory, store_url: str) -> None:
    store = open_store(store_url, max_responses=1000, max_bytes=BOUND)
    with serve(store=store) as running, httpx.Client(base_url=running.base_url, timeout=60) as http:
        conversation = http.post("/v1/conversations", json={"items": [_item(0)]}).json()["id"]
        added = 1
        while True:
            answer = http.post(f"/v1/conversations/{conversation}/items", json={"items": [_item(added)]})
            if answer.status_code != 200:
                break
            added += 1
            assert added < 20, "never refused"
        assert answer.status_code == 400, answer.text
        error = answer.json()["error"]
        assert error["code"] == "conversation_too_large" and error["param"] == "items"
        # What it holds is within the bound, and it was filled close to it (not refused early).
        pages = http.get(f"/v1/conversations/{conversation}/items", params={"limit": 100}).json()["data"]
        assert len(pages) == added
        held = sum(len(httpx.Response(200, json=item).content) + ITEM_OVERHEAD_BYTES for item in pages)
        assert BOUND - 2 * ITEM_TEXT < held <= BOUND
        # A turn whose input would take it past the bound is refused before generating.
        turn = http.post(
            "/v1/responses", json={"model": "m", "conversation": conversation, "input": "y" * (2 * ITEM_TEXT)}
        )
        assert turn.status_code == 400 and turn.json()["error"]["code"] == "conversation_too_large"
        assert turn.json()["error"]["param"] == "input"
        # Creating a conversation with more than the bound at once is refused too.
        many = [_item(i) for i in range(12)]
        created = http.post("/v1/conversations", json={"items": many})
        assert created.status_code == 400 and created.json()["error"]["code"] == "conversation_too_large"
        # A small turn still fits.
        small = http.post("/v1/responses", json={"model": "m", "conversation": conversation, "input": "hi"})
        assert small.status_code == 200, small.text
