"""A session's KV cache on TensorRT-LLM, per release, over the fake (docs/sessions-and-kv-cache.md): where its
turns are placed, the retention priority each turn is sent with, the release after it, and the host tier."""

from __future__ import annotations

import asyncio
import datetime
from typing import Any

import pytest
from support.trtllm_harness import collect, executor_for

from trtllm_responses.adapter import HarmonyAdapter
from trtllm_responses.executors.base import GenerationRequest
from trtllm_responses.executors.trtllm import TrtllmExecutor
from trtllm_responses.executors.trtllm_kv import attention_dp_rank
from trtllm_responses.harmony import HarmonyEncoding
from trtllm_responses.request.protocol import parse_request

AFFINITY = "1.3.0rc29"  # a release with ConversationParams and conversation-affinity routing
PYPI = "1.2.1"  # the last release on PyPI: neither


def _turn(adapter: HarmonyAdapter, text: str, request_id: str, **fields: Any) -> GenerationRequest:
    prompt = adapter.build_prompt(parse_request({"input": text})).token_ids
    base = GenerationRequest(request_id, prompt, _sampling(adapter))
    return GenerationRequest(base.request_id, base.prompt_token_ids, base.sampling, **fields)


def _sampling(adapter: HarmonyAdapter) -> Any:
    from trtllm_responses.executors.base import SamplingSettings

    return SamplingSettings(256, adapter.stop_token_ids)


async def _started(fake_trtllm: Any, monkeypatch: pytest.MonkeyPatch, release: str, **kwargs: Any) -> Any:
    monkeypatch.setattr(fake_trtllm, "__version__", release)
    executor = executor_for(kwargs.pop("encoding"), **kwargs)
    await executor.start()
    return executor


# -- placement ----------------------------------------------------------------------------------------------


async def test_where_the_engine_has_conversation_affinity_it_places_the_session(
    fake_trtllm: Any, monkeypatch: pytest.MonkeyPatch, encoding: HarmonyEncoding, adapter: HarmonyAdapter
) -> None:
    """1.3.0rc29, attention DP over 4 ranks: the engine is built with conversation affinity on, each turn carries
    conversation_params and no rank, and the engine keeps a session's turns on one rank."""
    executor = await _started(
        fake_trtllm,
        monkeypatch,
        AFFINITY,
        encoding=encoding,
        tensor_parallel_size=4,
        enable_attention_dp=True,
    )
    llm = executor._llm
    assert llm.args.attention_dp_config.kv_cache_routing_conversation_affinity is True
    for turn in range(3):
        for session in ("a", "b", "c"):
            await collect(
                executor, _turn(adapter, f"{session} {turn} " * 40, f"{session}{turn}", session_key=session)
            )
    assert all(p is None for p in llm.scheduling)
    assert llm.conversation_ids == ["a", "b", "c"] * 3
    by_session: dict[str, set[int]] = {}
    for conversation, rank in zip(llm.conversation_ids, llm.ranks, strict=True):
        by_session.setdefault(conversation, set()).add(rank)
    assert all(len(ranks) == 1 for ranks in by_session.values()), by_session
    assert len({next(iter(r)) for r in by_session.values()}) == 3  # first turns round-robined


async def test_an_operator_who_turned_affinity_off_gets_relaxed_ranks(
    fake_trtllm: Any, monkeypatch: pytest.MonkeyPatch, encoding: HarmonyEncoding, adapter: HarmonyAdapter
) -> None:
    executor = await _started(
        fake_trtllm,
        monkeypatch,
        AFFINITY,
        encoding=encoding,
        tensor_parallel_size=2,
        enable_attention_dp=True,
        attention_dp_config={"kv_cache_routing_conversation_affinity": False},
    )
    await collect(executor, _turn(adapter, "hi", "r1", session_key="s"))
    (params,) = executor._llm.scheduling
    assert params.attention_dp_rank == attention_dp_rank("s", 2) and params.attention_dp_relax is True


@pytest.mark.parametrize("release", ["1.1.0", "1.2.0", PYPI])
async def test_releases_without_it_name_the_rank_relaxed(
    release: str,
    fake_trtllm: Any,
    monkeypatch: pytest.MonkeyPatch,
    encoding: HarmonyEncoding,
    adapter: HarmonyAdapter,
) -> None:
    """1.1 to 1.2.1: no conversation_params; the session's rank named, relaxed: on it while it has room, on another
    when it is full (max_batch_size 1 here, a turn of another session still running there)."""
    executor = await _started(
        fake_trtllm,
        monkeypatch,
        release,
        encoding=encoding,
        tensor_parallel_size=2,
        enable_attention_dp=True,
        max_batch_size=1,
        max_num_tokens=8192,
    )
    assert not executor.takes_sessions
    llm = executor._llm
    rank = attention_dp_rank("s", 2)
    await collect(executor, _turn(adapter, "one", "r1", session_key="s"))
    # Another session on the same rank holds it (its generation not yet read to the end).
    other = next(k for k in (f"o{i}" for i in range(50)) if attention_dp_rank(k, 2) == rank)
    running = executor.generate(_turn(adapter, "two", "r2", session_key=other))
    await running.__anext__()
    await collect(executor, _turn(adapter, "three", "r3", session_key="s"))
    await running.aclose()
    assert all(p.attention_dp_relax is True for p in llm.scheduling)
    assert [p.attention_dp_rank for p in llm.scheduling] == [rank, rank, rank]
    assert llm.ranks == [rank, rank, 1 - rank]  # full: the relaxed turn ran on the other rank
    assert llm.conversation_ids == [None, None, None] and llm.router.waited == 0


async def test_the_fake_refuses_affinity_where_the_release_has_none(
    fake_trtllm: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fake_trtllm, "__version__", PYPI)
    with pytest.raises(ValueError, match="kv_cache_routing_conversation_affinity"):
        fake_trtllm.LLM(
            "/m",
            attention_dp_config={"kv_cache_routing_conversation_affinity": True},
            enable_attention_dp=True,
        )


# -- retention by the session's state -----------------------------------------------------------------------


async def test_a_turn_that_may_wait_for_a_client_tool_is_kept_raised_for_the_pause(
    fake_trtllm: Any, monkeypatch: pytest.MonkeyPatch, encoding: HarmonyEncoding, adapter: HarmonyAdapter
) -> None:
    monkeypatch.setattr(fake_trtllm, "__version__", AFFINITY)
    executor = TrtllmExecutor(
        {"model": "/ckpt/gpt-oss-tiny", "kv_cache_config": {"enable_block_reuse": True}},
        end_id=encoding.return_,
        tool_pause_seconds=45,
    )
    await executor.start()
    await collect(executor, _turn(adapter, "a", "r1", session_key="s", client_tools=True))
    first = executor._llm.prompts[0]
    assert {priority for _, priority in executor._llm.kv.state(first)} == {
        60
    }  # the fake's pool holds them so
    await collect(executor, _turn(adapter, "b", "r2", session_key="s"))
    await collect(executor, _turn(adapter, "c", "r3"))
    paused, answered, plain = executor._llm.retention_configs
    (prompt,) = paused.token_range_retention_configs
    assert (prompt.token_start, prompt.token_end, prompt.priority) == (0, None, 60)
    assert prompt.duration_ms == paused.decode_duration_ms == datetime.timedelta(seconds=45)
    assert paused.decode_retention_priority == 60
    # A turn that cannot wait for a client states the default over everything, so an earlier raise ends.
    (normal,) = answered.token_range_retention_configs
    assert (normal.priority, normal.duration_ms, answered.decode_retention_priority) == (35, None, 35)
    assert plain is None  # no session: the engine's own default
    # The start both prompts share (system and developer) was re-stamped by the second turn: 35 again.
    assert executor._llm.kv.state(first)[0][1] == 35


async def test_no_pause_flag_means_no_raise(
    fake_trtllm: Any, encoding: HarmonyEncoding, adapter: HarmonyAdapter
) -> None:
    executor = TrtllmExecutor({"model": "/m"}, end_id=encoding.return_, tool_pause_seconds=0)
    await executor.start()
    await collect(executor, _turn(adapter, "a", "r1", session_key="s", client_tools=True))
    (config,) = executor._llm.retention_configs
    assert config.token_range_retention_configs[0].priority == 35


# -- release -----------------------------------------------------------------------------------------------


async def _settled(executor: TrtllmExecutor) -> None:
    for _ in range(200):
        if not executor._releases:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the release never reached the engine")


@pytest.mark.parametrize("release", [PYPI, AFFINITY])
async def test_release_restamps_the_sessions_blocks_past_keep(
    release: str,
    fake_trtllm: Any,
    monkeypatch: pytest.MonkeyPatch,
    encoding: HarmonyEncoding,
    adapter: HarmonyAdapter,
) -> None:
    """``ended``: a one-token request over the session's tokens, salted and placed as its turns, whose retention
    puts every block from ``keep`` at 0 (evicted first, never offloaded); the shared start keeps its priority.
    ``answered``: back to 35."""
    executor = await _started(fake_trtllm, monkeypatch, release, encoding=encoding)
    turn = _turn(
        adapter, "tell me about tides " * 30, "r1", session_key="s", client_tools=True, cache_salt="t1"
    )
    await collect(executor, turn)
    llm = executor._llm
    tokens = turn.prompt_token_ids
    keep = 64
    executor.release("s", tokens, "t1", keep=keep, why="answered")
    await _settled(executor)
    assert [p for _, p in llm.kv.state(tokens, "t1")] == [60, 60] + [35] * (len(tokens) // 32 - 2)
    executor.release("s", tokens, "t1", keep=keep, why="ended")
    await _settled(executor)
    assert [p for _, p in llm.kv.state(tokens, "t1")] == [60, 60] + [0] * (len(tokens) // 32 - 2)
    released = llm.retention_configs[-1]
    (span,) = released.token_range_retention_configs
    assert (span.token_start, span.token_end, span.priority) == (keep, None, 0)
    assert llm.received[-1].max_tokens == 1 and llm.cache_salts[-1] == "t1"
    assert llm.conversation_ids[-1] == ("s" if release == AFFINITY else None)


async def test_echo_and_the_base_executor_release_nothing(encoding: HarmonyEncoding) -> None:
    from trtllm_responses.executors import EchoExecutor

    EchoExecutor(encoding).release("s", [1, 2, 3], None)  # a no-op, no error


# -- host offload ---------------------------------------------------------------------------------------------


async def test_a_pool_smaller_than_the_sessions_reuses_from_the_host(
    fake_trtllm: Any, encoding: HarmonyEncoding, adapter: HarmonyAdapter
) -> None:
    """Two sessions of ~1k tokens, a device pool of 1k: without a host tier each turn recomputes its prefix; with
    host_cache_size the other session's blocks are offloaded and onboarded again on its next turn."""

    async def second_turns(kv: dict[str, Any]) -> list[Any]:
        executor = executor_for(
            encoding, kv_cache_config={"enable_block_reuse": True, "max_tokens": 1024, **kv}
        )
        await executor.start()
        texts = {s: f"session {s} " + "the long shared history of this agent " * 120 for s in ("a", "b")}
        for s, text in texts.items():
            await collect(executor, _turn(adapter, text, f"{s}1", session_key=s))
        for s, text in texts.items():
            await collect(executor, _turn(adapter, text + " more", f"{s}2", session_key=s))
        return list(executor._llm.kv.turns)[-2:]

    cold = await second_turns({})
    assert all(t.reused_device + t.reused_host < t.prompt_tokens // 2 for t in cold)
    warm = await second_turns({"host_cache_size": 64 << 20, "secondary_offload_min_priority": 35})
    assert warm[0].reused_host > warm[0].prompt_tokens // 2 and warm[0].recomputed < cold[0].recomputed
