"""KV-cache prefixes and the server's caches across tenants, through a real server with a tenants file
(docs/tenants.md#sealed-content-kv-prefixes-and-caches): each tenant's prompts are salted with its own
``cache_salt`` (two tenants given one share it), so tenant B gets no cached tokens for A's prefix while A keeps
its hits (the fake TensorRT-LLM, whose block reuse honours ``generate_async(cache_salt=...)`` as PR #7106 made
it); a release without ``cache_salt`` is refused at start; the render and replay-prefix caches are per tenant,
so B's identical body moves none of the ``/stats`` counters A's moved (the issue's membership oracle).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from support.server_harness import RecordingEcho, RunningServer, ServerFactory, steps
from support.tenant_files import write_tenants
from support.trtllm_harness import executor_for

from trtllm_responses.adapter import HarmonyAdapter
from trtllm_responses.harmony import HarmonyEncoding
from trtllm_responses.request import parse_request
from trtllm_responses.server import create_app
from trtllm_responses.server.config import ServerConfig
from trtllm_responses.store import open_store

MODEL = "gpt-oss-test"
SHARED = {"cache_salt": "common-system-prompt"}


def ask(server: RunningServer, key: str, body: dict[str, Any]) -> dict[str, Any]:
    response = httpx.post(
        f"{server.base_url}/v1/responses",
        json={"model": MODEL, "store": False, **body},
        headers={"authorization": f"Bearer {key}"},
        timeout=60,
    )
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


# -- cache_salt ------------------------------------------------------------------------------------


def test_each_tenant_salts_its_prompts_and_two_may_share_a_salt(
    serve: ServerFactory, encoding: HarmonyEncoding, tmp_path: Path
) -> None:
    echo = RecordingEcho(encoding)
    path = write_tenants(tmp_path / "tenants.json", c=SHARED, d=SHARED)
    with serve(echo, tenants_file=str(path)) as running:
        for key in ("key-a", "key-b", "key-c", "key-d"):
            ask(running, key, {"input": "Hello"})
        with openai.OpenAI(base_url=running.base_url + "/v1", api_key="key-a", max_retries=0) as client:
            client.responses.create(model=MODEL, input="#lorem 5", tools=[{"type": "function", "name": "f"}])
    salts = [request.cache_salt for request in echo.requests]
    assert salts == ["tenant:a", "tenant:b", "common-system-prompt", "common-system-prompt", "tenant:a"]
    plain = RecordingEcho(encoding)
    with serve(plain) as running:  # open: nobody to keep apart, nothing salted
        ask(running, "unused", {"input": "Hello"})
    with serve(plain, api_key="the-key") as running:  # one key: one tenant
        ask(running, "the-key", {"input": "Hello"})
    assert [request.cache_salt for request in plain.requests] == [None, None]


def test_another_tenants_prefix_is_not_reused_in_the_kv_cache(
    fake_trtllm: Any, serve: ServerFactory, encoding: HarmonyEncoding, tmp_path: Path
) -> None:
    """TensorRT-LLM's ``cache_salt`` (``LLM.generate_async``: "KV cache will be salted with the provided string to
    limit the kv cache reuse to the requests with the same string"; PR #7106), played by the fake."""
    executor = executor_for(encoding)
    path = write_tenants(tmp_path / "tenants.json", c=SHARED, d=SHARED)
    prefix = {"input": "word " * 300}

    def cached(key: str, body: dict[str, Any]) -> int:
        tokens: int = ask(running, key, body)["usage"]["input_tokens_details"]["cached_tokens"]
        return tokens

    with serve(executor, tenants_file=str(path)) as running:
        assert cached("key-a", prefix) == 0
        assert cached("key-a", prefix) >= 288  # A's own prefix: reused
        assert cached("key-b", prefix) == 0  # B's time to first token says nothing of A's prompt
        assert cached("key-b", prefix) >= 288  # and B has its own hits
        assert cached("key-c", {"input": "other " * 300}) == 0
        assert cached("key-d", {"input": "other " * 300}) >= 288  # one salt given to both: shared
        llm = executor._llm
        assert llm is not None
        assert llm.cache_salts == ["tenant:a"] * 2 + ["tenant:b"] * 2 + ["common-system-prompt"] * 2


def test_a_sub_agents_turns_are_its_parents_tenants(
    serve: ServerFactory, encoding: HarmonyEncoding, tmp_path: Path
) -> None:
    """Sub-agents (the multi-agent beta) run as the tenant whose response spawned them: salted as it is."""
    echo = RecordingEcho(encoding)
    spawn = "call multi_agent.spawn_agent " + json.dumps({"task": "Hello from the child", "name": "kid"})
    script = steps(spawn, "call multi_agent.wait_agent {}", "All done.")
    with serve(echo, tenants_file=str(write_tenants(tmp_path / "tenants.json"))) as running:
        response = httpx.post(
            f"{running.base_url}/v1/responses",
            json={"model": MODEL, "input": script, "multi_agent": {"enabled": True}},
            headers={"authorization": "Bearer key-a", "openai-beta": "responses_multi_agent=v1"},
            timeout=60,
        )
        assert response.status_code == 200, response.text
    children = [
        r for r in echo.requests if "Hello from the child" in encoding.decode(r.prompt_token_ids[-40:])
    ]
    assert children, "the sub-agent ran"
    assert {r.cache_salt for r in echo.requests} == {"tenant:a"}


async def test_a_release_without_cache_salt_is_refused_when_tenants_are_configured(
    fake_trtllm: Any,
    serve: ServerFactory,
    encoding: HarmonyEncoding,
    adapter: HarmonyAdapter,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    original = fake_trtllm.LLM.generate_async

    def unsalted(self: Any, inputs: Any, sampling_params: Any = None, streaming: bool = False) -> Any:
        return original(self, inputs, sampling_params=sampling_params, streaming=streaming)

    monkeypatch.setattr(fake_trtllm.LLM, "generate_async", unsalted)
    path = write_tenants(tmp_path / "tenants.json")
    executor = executor_for(encoding)
    config = ServerConfig(served_model_name=MODEL, start_render_worker=False, tenants_file=str(path))
    store = open_store(
        config.store, max_responses=config.max_stored_responses, max_bytes=config.max_store_bytes
    )
    app = create_app(config, executor, store, adapter)
    with pytest.raises(RuntimeError, match="cannot keep tenants apart: .* takes no cache_salt"):
        async with app.api.router.lifespan_context(app.api):
            pass
    assert executor._llm is None, "the engine it started was shut down"
    with serve(executor_for(encoding), api_key="the-key") as running:  # one tenant: nothing to keep apart
        await asyncio.to_thread(ask, running, "the-key", {"input": "Hello"})
    no_reuse = executor_for(encoding, kv_cache_config={"enable_block_reuse": False})
    with serve(no_reuse, tenants_file=str(path)) as running:  # nothing is reused, so nothing crosses
        await asyncio.to_thread(ask, running, "key-a", {"input": "Hello"})


# -- the render and replay-prefix caches --------------------------------------------------------------


@pytest.fixture
def server(serve: ServerFactory, tmp_path: Path) -> Iterator[RunningServer]:
    with serve(tenants_file=str(write_tenants(tmp_path / "tenants.json"))) as running:
        yield running


def caches(server: RunningServer) -> tuple[int, int]:
    """``/stats`` (an admin's key): the render cache's and the replay-prefix cache's hits."""
    found = httpx.get(f"{server.base_url}/stats", headers={"authorization": "Bearer key-ops"}, timeout=10)
    assert found.status_code == 200, found.text
    stats = found.json()["caches"]
    return stats["rendered_items"]["hits"], stats["replay_prefixes"]["hits"]


def test_a_tenants_replay_finds_none_of_another_tenants_cached_renders_or_prefixes(
    server: RunningServer,
) -> None:
    """The issue's oracle: B sends what A sent (A's exact history, guessed): no counter moves as it did for A."""
    secret = "\n".join(f"{i}. the secret plan, step {i}, known to tenant a alone." for i in range(1600))
    assert len(secret) > 64 << 10  # large enough to be remembered as a replay prefix
    first = [{"role": "user", "content": secret}, {"role": "user", "content": "turn 1"}]
    again = [*first, {"role": "user", "content": "turn 2"}]
    ask(server, "key-a", {"input": first})
    before = caches(server)
    ask(server, "key-a", {"input": again})
    after_a = caches(server)
    assert after_a[0] - before[0] >= 2 and after_a[1] - before[1] == 1  # A's own history: found
    ask(server, "key-b", {"input": again})
    assert caches(server) == after_a  # B's guess, right to the byte: nothing found, nothing to measure
    ask(server, "key-b", {"input": again})
    after_b = caches(server)
    assert after_b[0] - after_a[0] >= 3 and after_b[1] - after_a[1] == 1  # B's own repeat is found


def test_a_developer_message_is_found_again_by_its_own_tenant_only(adapter: HarmonyAdapter) -> None:
    """The developer-message cache (instructions and tools) is keyed by the tenant's scope too: its hit would
    otherwise say, by how fast a prompt renders, that another tenant runs these instructions."""
    request = parse_request({"input": "hi", "instructions": "The secret system prompt of tenant a."})
    adapter.admit(adapter.finish_prompt(*_drafted(adapter, request, "a/")))
    assert adapter.draft_prompt(request, scope="a/").developer is not None
    assert adapter.draft_prompt(request, scope="b/").developer is None
    assert adapter.draft_prompt(request).developer is None


def _drafted(adapter: HarmonyAdapter, request: Any, scope: str) -> tuple[Any, Any]:
    draft = adapter.draft_prompt(request, scope=scope)
    return draft, adapter.render_messages(draft.to_render)
