"""Session identity from headers (``request/affinity.py``): the families in order (TensorRT-LLM's four, Codex,
Claude Code, Dynamo), thread before tree, the parent and the end flag; stripped, empty ones skipped; the bound
and the characters crossed."""

from __future__ import annotations

import pytest

from trtllm_responses.core import InvalidRequestError
from trtllm_responses.request import (
    MAX_SESSION_KEY,
    NO_IDENTITY,
    SessionIdentity,
    key_of_cache_key,
    session_identity,
)


def headers(**values: str) -> list[tuple[bytes, bytes]]:
    return [(name.replace("_", "-").encode(), value.encode("latin-1")) for name, value in values.items()]


def key(**values: str) -> str | None:
    return session_identity(headers(**values)).key


def test_first_non_empty_header_in_order_wins() -> None:
    assert key(session_id="codex", x_session_id="mine") == "mine"
    assert key(x_multi_turn_session_id="m", x_correlation_id="c") == "c"
    assert key(x_session_id="  ", x_session_affinity=" a ") == "a"
    assert key(session_id="0195e3b4-5a6f-7c2d-9e01-23456789abcd") == "0195e3b4-5a6f-7c2d-9e01-23456789abcd"
    assert key(x_claude_code_session_id="cc", x_dynamo_session_id="d") == "cc"
    assert key(session_id="codex", x_claude_code_session_id="cc") == "codex"
    assert session_identity(headers(x_session_id="")) is NO_IDENTITY
    assert session_identity(headers(authorization="Bearer sk-secret", cookie="s=1")) is NO_IDENTITY


def test_a_thread_is_the_key_and_its_tree_the_parent() -> None:
    assert session_identity(headers(session_id="T", thread_id="t1")) == SessionIdentity("t1", "T")
    assert session_identity(headers(session_id="T", thread_id="T")) == SessionIdentity("T")  # Codex's root
    assert session_identity(headers(thread_id="t1", x_codex_parent_thread_id="t0", session_id="T")) == (
        SessionIdentity("t1", "t0")
    )
    assert session_identity(headers(x_claude_code_session_id="S", x_claude_code_agent_id="a")) == (
        SessionIdentity("a", "S")
    )
    # The main thread of Claude Code: no agent id, no parent (a parent header alone names nothing).
    assert session_identity(headers(x_claude_code_session_id="S", x_claude_code_parent_agent_id="p")) == (
        SessionIdentity("S")
    )
    assert session_identity(
        headers(x_dynamo_session_id="d", x_dynamo_parent_session_id="d")
    ) == SessionIdentity("d")


@pytest.mark.parametrize(
    ("value", "final"), [("true", True), (" TRUE ", True), ("1", True), ("false", False), ("0", False)]
)
def test_the_end_flag(value: str, final: bool) -> None:
    assert session_identity(headers(x_dynamo_session_id="d", x_dynamo_session_final=value)).final is final
    assert session_identity(headers(x_dynamo_session_final=value)) == SessionIdentity(final=final)


def test_the_bound_is_crossed() -> None:
    at_bound = "k" * MAX_SESSION_KEY
    assert key(x_session_id=at_bound) == at_bound
    with pytest.raises(InvalidRequestError) as err:
        key(x_session_id=at_bound + "k")
    assert err.value.param == "x-session-id" and err.value.code == "invalid_session_id"
    with pytest.raises(InvalidRequestError) as err:
        key(
            x_claude_code_agent_id="a",
            x_claude_code_session_id="S",
            x_claude_code_parent_agent_id=at_bound + "k",
        )
    assert err.value.param == "x-claude-code-parent-agent-id"


@pytest.mark.parametrize(
    "value", ["a b", "a,b", "a;b", 'a"b', "a\tb", "caf\xe9", "a\x00b", "a\x7fb", "a%20b"]
)
def test_characters_that_could_split_or_smuggle_a_header_are_refused(value: str) -> None:
    with pytest.raises(InvalidRequestError) as err:
        key(session_id=value)
    assert err.value.param == "session-id" and value not in err.value.message


def test_a_prompt_cache_key_is_the_key_or_its_digest() -> None:
    assert key_of_cache_key("thread-42") == "thread-42"
    digest = key_of_cache_key("my cache, key")
    assert digest.startswith("pck_") and digest == key_of_cache_key("my cache, key")
    assert key(x_session_id=digest) == digest  # a key itself
