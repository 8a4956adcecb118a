"""Tenants across a group of frontends (``serve --num_serve_frontends 2 --tenants FILE``): what one tenant
stores or runs on one frontend is unknown to another tenant on the other, whether the other frontend reads
the shared store, follows the Redis relay or hands the request to its peer (SQLite); the owner reaches it
from either (docs/tenants.md#isolation). The in-process matrix is ``tests/server/test_isolation.py``.
"""

from __future__ import annotations

import json
from contextlib import closing
from pathlib import Path

import pytest
from support.process_harness import ServeProcess, on_frontend

from trtllm_responses.tenants import hash_key

KEYS = {"a": "key-of-a", "b": "key-of-b"}


def bearer(tenant: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {KEYS[tenant]}"}


@pytest.mark.parametrize("store", ["sqlite", "redis"])
def test_a_tenants_responses_are_its_own_on_every_frontend(
    store: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    tenants = tmp_path / "tenants.json"
    tenants.write_text(json.dumps({"tenants": {n: {"keys": [hash_key(k)]} for n, k in KEYS.items()}}))
    url = f"sqlite:///{tmp_path / 'group.db'}" if store == "sqlite" else request.getfixturevalue("redis").url
    flags = ("--num_serve_frontends", "2", "--store", url, "--tenants", str(tenants))
    server = ServeProcess(*flags, "--echo_tokens_per_second", "200").start()
    try:
        with closing(on_frontend(server, 0, bearer("a"))) as owner:
            stored = owner.post("/v1/responses", json={"model": "m", "input": "A's secret", "store": True})
            assert stored.status_code == 200, stored.text
            body = {"model": "m", "input": "#lorem 6000", "background": True, "store": True}  # ~30 s
            running = owner.post("/v1/responses", json=body).json()["id"]
        # tenant b on the other frontend, by Bearer and by Anthropic's x-api-key: unknown, as a made-up id
        fake = "resp_" + "0" * 32
        for headers in (bearer("b"), {"x-api-key": KEYS["b"]}):
            with closing(on_frontend(server, 1, headers)) as other:
                for the_id in (stored.json()["id"], running):
                    for method, path in [
                        ("GET", "/v1/responses/{}"),
                        ("GET", "/v1/responses/{}?stream=true&starting_after=0"),
                        ("POST", "/v1/responses/{}/cancel"),
                        ("GET", "/v1/responses/{}/input_items"),
                        ("DELETE", "/v1/responses/{}"),
                    ]:
                        theirs = other.request(method, path.format(the_id))
                        none = other.request(method, path.format(fake))
                        assert theirs.status_code == none.status_code == 404, (method, path, theirs.text)
                        assert theirs.text.replace(the_id, fake) == none.text
                    follow = {"model": "m", "input": "go on", "previous_response_id": the_id}
                    assert other.post("/v1/responses", json=follow).status_code == 404
        # tenant a reaches both from the other frontend, by either header
        with closing(on_frontend(server, 1, {"x-api-key": KEYS["a"]})) as owner_elsewhere:
            assert owner_elsewhere.get(f"/v1/responses/{stored.json()['id']}").json()["output"]
            assert owner_elsewhere.get(f"/v1/responses/{running}").json()["status"] in (
                "queued",
                "in_progress",
            )
            cancelled = owner_elsewhere.post(f"/v1/responses/{running}/cancel")
            assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled", cancelled.text
    finally:
        server.terminate()
