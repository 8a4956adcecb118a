"""Session keys from headers (``request/affinity.py``): TensorRT-LLM's four headers in its order, then Codex's
``session-id``; stripped, empty ones skipped; the bound and the characters crossed."""

from __future__ import annotations

import pytest

from trtllm_responses.core import InvalidRequestError
from trtllm_responses.request import (
    AFFINITY_HEADERS,
    MAX_SESSION_KEY,
    key_of_cache_key,
    session_key_from_headers,
)


def headers(**values: str) -> list[tuple[bytes, bytes]]:
    return [(name.replace("_", "-").encode(), value.encode("latin-1")) for name, value in values.items()]


def test_the_headers_are_tensorrt_llms_then_codexs() -> None:
    # tensorrt_llm/serve/conversation_id.py, CONVERSATION_ID_HEADERS, then what Codex 0.169 sends.
    assert AFFINITY_HEADERS == (
        "x-session-id",
        "x-correlation-id",
        "x-session-affinity",
        "x-multi-turn-session-id",
        "session-id",
    )


def test_first_non_empty_header_in_order_wins() -> None:
    assert session_key_from_headers(headers(session_id="codex", x_session_id="mine")) == "mine"
    assert session_key_from_headers(headers(x_multi_turn_session_id="m", x_correlation_id="c")) == "c"
    assert session_key_from_headers(headers(x_session_id="  ", x_session_affinity=" a ")) == "a"
    assert session_key_from_headers(headers(session_id="0195e3b4-5a6f-7c2d-9e01-23456789abcd")) == (
        "0195e3b4-5a6f-7c2d-9e01-23456789abcd"
    )
    assert session_key_from_headers(headers(x_session_id="")) is None
    assert session_key_from_headers(headers(authorization="Bearer sk-secret", cookie="s=1")) is None


def test_the_bound_is_crossed() -> None:
    at_bound = "k" * MAX_SESSION_KEY
    assert session_key_from_headers(headers(x_session_id=at_bound)) == at_bound
    with pytest.raises(InvalidRequestError) as err:
        session_key_from_headers(headers(x_session_id=at_bound + "k"))
    assert err.value.param == "x-session-id" and err.value.code == "invalid_session_id"


@pytest.mark.parametrize("value", ["a b", "a,b", "a;b", 'a"b', "a\tb", "caf\xe9", "a\x00b", "a\x7fb"])
def test_characters_that_could_split_or_smuggle_a_header_are_refused(value: str) -> None:
    with pytest.raises(InvalidRequestError) as err:
        session_key_from_headers(headers(session_id=value))
    assert err.value.param == "session-id"


def test_a_prompt_cache_key_is_the_key_or_its_digest() -> None:
    assert key_of_cache_key("thread-42") == "thread-42"
    digest = key_of_cache_key("my cache, key")
    assert digest.startswith("pck_") and digest == key_of_cache_key("my cache, key")
    assert session_key_from_headers(headers(x_session_id=digest)) == digest  # a key itself
