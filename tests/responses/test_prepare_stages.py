"""``ResponsesService.prepare`` as named stages (``responses/prepare.py``), each driven on its own.

Every stage runs here over a real service's collaborators (the echo executor, the in-memory store, the
session's adapter, a real conversation, real prompt templates), no mocks: what it decides, what it spends
from the request's input budget, and the 400s it refuses with, in their order. The last tests pin the
pipeline itself: ``prepare`` is the list of stages, short, in the order ``prepare.py`` documents.
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import json
import re
import textwrap
from pathlib import Path
from typing import Any

import orjson
import pytest

from trtllm_responses.adapter import HarmonyAdapter
from trtllm_responses.core import InvalidRequestError, NotFoundError
from trtllm_responses.executors import EchoExecutor
from trtllm_responses.harmony.encoding import HarmonyEncoding
from trtllm_responses.request import decode_body, parse_request
from trtllm_responses.request.body import MAX_JSON_DEPTH
from trtllm_responses.responses import ContentSealer, Origin, PromptTemplates, ResponsesService
from trtllm_responses.responses import prepare as stages
from trtllm_responses.responses.budget import InputBudget
from trtllm_responses.responses.prepare import Preparation
from trtllm_responses.responses.sessions import Chain
from trtllm_responses.store import ConversationHistoryStore


def service_on(adapter: HarmonyAdapter, encoding: HarmonyEncoding, **options: Any) -> ResponsesService:
    options.setdefault("executor", EchoExecutor(encoding))
    return ResponsesService(
        store=ConversationHistoryStore(10, 1 << 20), adapter=adapter, model_name="m", **options
    )


def opened(service: ResponsesService, data: dict[str, Any], origin: Origin | None = None) -> Preparation:
    """The first stage, on ``data`` as a received body."""
    return asyncio.run(opening(service, data, origin))


async def opening(
    service: ResponsesService, data: dict[str, Any], origin: Origin | None = None
) -> Preparation:
    """:func:`opened`, in a running loop."""
    body = decode_body(orjson.dumps(data))
    return await stages.open_request(
        body, origin or Origin(), service.max_input_bytes, service.executor.max_seq_len
    )


def refusal(exc: pytest.ExceptionInfo[Any]) -> tuple[int, str | None, str | None]:
    return exc.value.status_code, exc.value.param, exc.value.code


def test_the_budget_refuses_what_the_client_sent_before_any_field_is_read(
    adapter: HarmonyAdapter, encoding: HarmonyEncoding
) -> None:
    service = service_on(adapter, encoding, max_input_bytes=200)
    too_large = {"input": "x" * 300, "temperature": "hot"}  # over the limit, and a field wrong
    with pytest.raises(InvalidRequestError) as exc:
        opened(service, too_large)
    assert refusal(exc) == (400, "input", "context_length_exceeded")
    assert exc.value.message == (
        "The request is larger than 200 bytes, more than this model's context window of 131072 tokens can "
        "hold (--max_input_bytes)."
    )
    # A translation (Chat Completions, Messages) is measured by what the client sent: its larger own
    # form is spent (and rendered by), past the limit.
    p = opened(service, {"input": "x" * 300}, Origin(sent_bytes=150))
    assert p.budget.spent == len(orjson.dumps({"input": "x" * 300})) and p.budget.left < 0
    with pytest.raises(InvalidRequestError) as exc:
        opened(service, {"input": "hi", "temperature": "hot"})
    assert exc.value.param == "temperature"


def test_a_body_built_here_is_measured_then_walked_as_a_received_one(
    adapter: HarmonyAdapter, encoding: HarmonyEncoding
) -> None:
    service = service_on(adapter, encoding, max_input_bytes=1000)
    deep: dict[str, Any] = {"input": "hi", "metadata": {}}
    inner = deep["metadata"]
    for _ in range(MAX_JSON_DEPTH + 1):
        inner["k"] = {}
        inner = inner["k"]
    with pytest.raises(InvalidRequestError) as exc:
        asyncio.run(service.body_of(deep))
    assert "more than 64 levels deep" in exc.value.message
    with pytest.raises(InvalidRequestError) as exc:  # both wrong: the size first, as prepare does
        asyncio.run(service.body_of({**deep, "input": "x" * 1200}))
    assert exc.value.code == "context_length_exceeded"
    body = asyncio.run(
        service.body_of({"input": "x" * 1200}, Origin(sent_bytes=150))
    )  # a translation of 150 bytes
    assert body.size == len(orjson.dumps({"input": "x" * 1200})) and body.data["input"] == "x" * 1200


def test_a_template_spends_what_it_adds_and_is_refused_past_what_is_left(
    adapter: HarmonyAdapter, encoding: HarmonyEncoding, tmp_path: Path
) -> None:
    (tmp_path / "pmpt_twice").mkdir()
    template = {"input": [{"role": "user", "content": "{{v}} and {{v}}"}]}
    (tmp_path / "pmpt_twice" / "1.json").write_text(json.dumps(template))
    data = {"prompt": {"id": "pmpt_twice", "variables": {"v": "y" * 100}}}
    service = service_on(adapter, encoding, prompts=PromptTemplates(tmp_path), max_input_bytes=1000)
    p = opened(service, data)
    before = p.budget.spent
    asyncio.run(stages.apply_template(p, service.prompts))
    assert p.budget.spent - before >= 200  # both uses of the value
    assert not isinstance(p.request.input, str) and len(p.request.input) == 1
    room = len(orjson.dumps(data)) + 100  # the body fits; the template's 200 bytes and more do not
    small = service_on(adapter, encoding, prompts=PromptTemplates(tmp_path), max_input_bytes=room)
    p = opened(small, data)
    with pytest.raises(InvalidRequestError) as exc:
        asyncio.run(stages.apply_template(p, small.prompts))
    assert refusal(exc) == (400, "prompt.variables", "context_length_exceeded")
    assert p.request.prompt is not None  # refused before it was expanded


def test_a_team_is_formed_only_under_the_beta_header(
    adapter: HarmonyAdapter, encoding: HarmonyEncoding
) -> None:
    service = service_on(adapter, encoding)
    data = {"input": "hi", "multi_agent": {"enabled": True}}
    for beta in (False, True):
        p = opened(service, data, Origin(multi_agent_beta=beta))
        stages.form_team(p, service, service.subagents, service.tool_settings.tool_timeout)
        assert (p.team is not None, p.coordinator is not None) == (beta, beta)


def test_options_are_refused_in_order_logprobs_for_every_choice_first(
    adapter: HarmonyAdapter, encoding: HarmonyEncoding
) -> None:
    service = service_on(adapter, encoding)
    data = {"input": "hi", "top_logprobs": 20, "max_output_tokens": 1000, "reasoning": {"summary": "bogus"}}
    with pytest.raises(InvalidRequestError) as exc:  # 16 choices x 21 logprobs: 780 tokens at most
        asyncio.run(stages.check_options(opened(service, data, Origin(choices=16)), service.store))
    assert refusal(exc) == (400, "max_output_tokens", "too_many_logprobs")
    with pytest.raises(InvalidRequestError) as exc:
        asyncio.run(stages.check_options(opened(service, data), service.store))
    assert refusal(exc) == (400, "reasoning.summary", "invalid_value")
    p = opened(service, {**data, "reasoning": {"summary": "auto"}})
    asyncio.run(stages.check_options(p, service.store))
    assert (p.logprob_tokens, p.summaries) == ((1 << 18) // 21, "auto")


def test_a_conversation_is_read_and_a_reference_to_its_item_expanded_within_the_budget(
    adapter: HarmonyAdapter, encoding: HarmonyEncoding
) -> None:
    service = service_on(adapter, encoding)
    item = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "remember 42"}]}

    async def main() -> tuple[Preparation, str]:
        conversation = orjson.loads(await service.conversations.create(orjson.dumps({"items": [item]})))
        listed = orjson.loads(
            await service.conversations.list_items(conversation["id"], after=None, limit=10, order="asc")
        )
        item_id = listed["data"][0]["id"]
        data = {"input": [{"type": "item_reference", "id": item_id}], "conversation": conversation["id"]}
        p = await opening(service, data)
        await stages.read_conversation(p, service.conversations)
        before = p.budget.spent
        await stages.read_input(p, service.store)
        assert p.budget.spent > before  # the item's JSON, spent
        return p, item_id

    p, item_id = asyncio.run(main())
    assert p.seen == (1, item_id) and p.history is not None and len(p.history.messages) == 1
    assert not isinstance(p.request.input, str) and p.request.input[0].data["id"] == item_id
    with pytest.raises(NotFoundError):
        asyncio.run(
            stages.read_conversation(
                opened(service, {"input": "hi", "conversation": "conv_x"}), service.conversations
            )
        )


def test_a_final_compaction_trigger_is_taken_off_the_input_and_elsewhere_refused(
    adapter: HarmonyAdapter, encoding: HarmonyEncoding
) -> None:
    service = service_on(adapter, encoding)
    hi, trigger = {"role": "user", "content": "hi"}, {"type": "compaction_trigger"}
    p = opened(service, {"input": [hi, trigger]})
    asyncio.run(stages.read_input(p, service.store))
    assert p.compaction_asked and len(p.request.input) == 1
    with pytest.raises(InvalidRequestError) as exc:
        asyncio.run(stages.read_input(opened(service, {"input": [trigger, hi]}), service.store))
    assert exc.value.param == "input[0]"


def test_a_chain_is_continued_from_the_lookup_first_and_names_the_session(
    adapter: HarmonyAdapter, encoding: HarmonyEncoding
) -> None:
    service = service_on(adapter, encoding)
    chain = Chain(adapter.build_prompt(parse_request({"input": "earlier"})).history, "session-1")
    origin = Origin(lookup={"resp_a": chain}.get)
    p = opened(service, {"input": "go on", "previous_response_id": "resp_a", "store": False}, origin)
    asyncio.run(stages.continue_chain(p, service.chains))
    assert p.history is chain.history and p.session.key == "session-1" and p.response_id.startswith("resp_")
    p = opened(service, {"input": "go on", "previous_response_id": "resp_b"}, origin)
    with pytest.raises(InvalidRequestError) as exc:  # over a WebSocket: a 400
        asyncio.run(stages.continue_chain(p, service.chains))
    assert refusal(exc) == (400, "previous_response_id", "previous_response_not_found")
    with pytest.raises(NotFoundError):  # over HTTP: a 404
        asyncio.run(
            stages.continue_chain(
                opened(service, {"input": "go", "previous_response_id": "resp_b"}), service.chains
            )
        )
    for store, session_is_own in ((True, True), (False, False)):  # a stored response roots its own session
        p = opened(service, {"input": "hi", "store": store})
        asyncio.run(stages.continue_chain(p, service.chains))
        assert (p.session.key == p.response_id) == session_is_own and (p.session.key is None) == (not store)


def prepared_to(
    service: ResponsesService, data: dict[str, Any], last: str, origin: Origin | None = None
) -> Preparation:
    """``data`` run through the stages up to ``last`` (included), as ``prepare`` runs them."""

    async def main() -> Preparation:
        p = await opening(service, data, origin)
        await stages.apply_template(p, service.prompts)
        await stages.check_options(p, service.store)
        await stages.read_conversation(p, service.conversations)
        await stages.read_input(p, service.store)
        await stages.continue_chain(p, service.chains)
        await stages.render_prompt(p, service.renderer)
        if last == "render_prompt":
            return p
        await stages.compact_if_asked(p, service.compactor)
        if last == "compact_if_asked":
            return p
        stages.fit_window(p, service.executor, service.adapter)
        return p

    return asyncio.run(main())


def test_the_prompt_is_the_one_the_adapter_builds(adapter: HarmonyAdapter, encoding: HarmonyEncoding) -> None:
    service = service_on(adapter, encoding)
    data = {"input": "What is the tide at Brest?", "instructions": "Be brief."}
    p = prepared_to(service, data, "render_prompt")
    assert p.prompt.token_ids == adapter.build_prompt(parse_request(data)).token_ids and p.tools is None


def test_the_conversation_is_compacted_first_only_when_asked_and_allowed(
    adapter: HarmonyAdapter, encoding: HarmonyEncoding
) -> None:
    service = service_on(adapter, encoding, sealer=ContentSealer(b"k" * 32))
    talk = [{"role": "user", "content": f"turn {i}: " + "lorem ipsum " * 40} for i in range(6)]
    data = {"input": [*talk, {"type": "compaction_trigger"}], "store": False}
    kept = prepared_to(service, data, "compact_if_asked", Origin(compact=False))
    assert kept.compaction is None
    compacted = prepared_to(service, data, "compact_if_asked")
    assert compacted.compaction is not None and compacted.compaction.compaction_item["type"] == "compaction"
    assert len(compacted.prompt.token_ids) != len(
        kept.prompt.token_ids
    )  # the window's prompt, not the talk's
    with pytest.raises(InvalidRequestError) as exc:  # no key to seal a summary with: a 400
        prepared_to(service_on(adapter, encoding), data, "compact_if_asked")
    assert "encryption key" in exc.value.message


def test_the_window_is_fitted_by_truncation_or_refused(
    adapter: HarmonyAdapter, encoding: HarmonyEncoding
) -> None:
    service = service_on(adapter, encoding, executor=EchoExecutor(encoding, max_seq_len=600))
    talk = [{"role": "user", "content": f"turn {i}: " + "lorem ipsum " * 30} for i in range(10)]
    with pytest.raises(InvalidRequestError) as exc:
        prepared_to(service, {"input": talk}, "fit_window")
    assert refusal(exc) == (400, "input", "context_length_exceeded")
    assert exc.value.message.endswith("this model's context window is 600 tokens.")
    p = prepared_to(service, {"input": talk, "truncation": "auto"}, "fit_window")
    assert p.truncated > 0 and len(p.prompt.token_ids) < 600


def test_the_generation_the_snapshot_and_what_is_frozen(
    adapter: HarmonyAdapter, encoding: HarmonyEncoding
) -> None:
    sealer = ContentSealer(b"k" * 32)
    service = service_on(adapter, encoding, sealer=sealer)
    data = {
        "input": "hi",
        "top_logprobs": 20,
        "include": ["reasoning.encrypted_content"],
        "metadata": {"a": "b"},
    }
    p = prepared_to(service, data, "fit_window")
    generation = stages.generation_of(p, service.executor, service.adapter, service.sampling_defaults)
    assert generation.request_id == p.response_id and generation.prompt_token_ids == p.prompt.token_ids
    assert generation.sampling.max_tokens == p.logprob_tokens  # fewer than the window's room
    response = asyncio.run(stages.first_snapshot(p, generation, "m", service.store, service.adapter))
    assert (
        response.id == p.response_id and response.status == "in_progress" and response.metadata == {"a": "b"}
    )
    prepared = stages.freeze(p, generation, response, sealer, False, 30.0)
    assert prepared.seal_reasoning is not None and prepared.tool_timeout == 30.0
    assert len(prepared.input_item_ids) == 1 and orjson.loads(prepared.input_items_json[0])["role"] == "user"
    unstored = stages.freeze(p, generation, response, None, False, 30.0)
    assert unstored.seal_reasoning is None and unstored.seal_tool_read is None


#: The stages, in the order ``prepare`` runs them (and ``prepare.py``'s docstring lists them).
ORDER = [
    "open_request",
    "apply_template",
    "form_team",
    "check_options",
    "read_conversation",
    "read_input",
    "continue_chain",
    "render_prompt",
    "compact_if_asked",
    "fit_window",
    "admit_prompt",
    "keep_input",
    "generation_of",
    "first_snapshot",
    "freeze",
]


def test_prepare_is_the_list_of_its_stages_in_the_documented_order() -> None:
    source = textwrap.dedent(inspect.getsource(ResponsesService.prepare))
    assert len(source.splitlines()) <= 40
    calls = [node for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Call)]
    called = [
        c.func.id
        for c in sorted(calls, key=lambda c: (c.lineno, c.col_offset))
        if isinstance(c.func, ast.Name)
    ]
    assert [name for name in called if name in stages.__all__] == ORDER
    assert re.findall(r":func:`(\w+)`", stages.__doc__ or "") == ORDER


def test_a_budget_counts_what_it_spends() -> None:
    budget = InputBudget(100, 10, spent=30)
    budget.spend(50)
    assert (budget.spent, budget.left) == (80, 20)
    budget.check(100)
    with pytest.raises(InvalidRequestError):
        budget.check(101)


def test_the_stored_items_json_holds_no_spare_buffer() -> None:
    """Each item's JSON as the store keeps it is an exact-size copy (orjson's bytes keep a 32 KiB working
    buffer): ``keep_input`` makes them so, one an item, in steps."""
    import tracemalloc

    from trtllm_responses.core import at_once
    from trtllm_responses.request import parse_items

    typed = parse_items([{"role": "user", "content": "word " * 600} for _ in range(4)])
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    (ids, dumped), minted = at_once(stages._kept(typed))
    held = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    assert len(dumped) == 4 and minted == ids
    assert held < 3 * sum(map(len, dumped))
