"""request/body.py: a body's shape is counted before it is parsed, and a body is parsed and checked once."""

from __future__ import annotations

import asyncio
import json
import threading

import orjson
import pytest

from trtllm_responses.core import InvalidRequestError
from trtllm_responses.request import body as body_module
from trtllm_responses.request import parse_request
from trtllm_responses.request.body import (
    INLINE_PARSE_BYTES,
    INLINE_PARSE_VALUES,
    MAX_JSON_VALUES,
    BodyDecoder,
    JsonBody,
    count_values,
    decode_body,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("{}", 1),
        ('{"a":[1,2,3]}', 4),  # the object, the array, two commas
        ('{"a":"x,y,{z}[w]"}', 1),  # nothing inside a string counts (once counting is exact)
        ('{"a":"quote \\" , still inside, \\\\","b":[{}]}', 4),
    ],
)
def test_values_are_counted_outside_strings(text: str, expected: int) -> None:
    # Past the limit the count is exact (outside strings); within it, an upper bound is enough.
    assert count_values(text, limit=expected - 1) == expected
    assert count_values(text.encode(), limit=expected - 1) == expected
    assert count_values(text, limit=expected) >= expected


def test_an_unterminated_string_is_counted_in_linear_time() -> None:
    text = '{"a":"' + "\\x" * 500_000  # a regex with backtracking would take hours
    assert count_values(text, limit=0) == 1


def test_a_body_over_the_value_budget_is_refused_before_it_is_parsed(monkeypatch: pytest.MonkeyPatch) -> None:
    parsed: list[object] = []
    monkeypatch.setattr(body_module, "json_object", lambda raw: parsed.append(raw) or {})
    shape = '{"x":[' + ",".join(["{}"] * MAX_JSON_VALUES) + "]}"
    with pytest.raises(InvalidRequestError) as refused:
        decode_body(shape)
    assert refused.value.code == "too_many_json_values" and refused.value.status_code == 400
    assert str(MAX_JSON_VALUES) in refused.value.message
    assert parsed == []  # never parsed
    # The same bytes as one string are one value: bytes alone decide nothing.
    assert decode_body(orjson.dumps({"x": shape})).values <= 2 * MAX_JSON_VALUES


def test_a_body_within_the_budget_is_parsed_once_and_not_walked_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    walks: list[object] = []
    real = body_module.check_depth
    monkeypatch.setattr(body_module, "check_depth", lambda data: walks.append(data) or real(data))
    from trtllm_responses.request import protocol

    monkeypatch.setattr(protocol, "check_depth", lambda data: walks.append(data) or real(data))
    raw = json.dumps({"input": "hi", "x": [{}] * 1000}).encode()
    checked = decode_body(raw)
    assert checked == JsonBody(checked.data, len(raw), count_values(raw))
    assert parse_request(checked).input == "hi"
    assert len(walks) == 1


def test_depth_and_type_are_checked_at_decoding() -> None:
    deep: object = 1
    for _ in range(100):
        deep = [deep]
    with pytest.raises(InvalidRequestError, match="64 levels"):
        decode_body(orjson.dumps({"input": deep}))
    with pytest.raises(InvalidRequestError, match="JSON object"):
        decode_body(b"[1]")


def test_large_bodies_are_decoded_in_the_decoder_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    decoder = BodyDecoder()
    seen: list[str] = []
    real = body_module.json_object

    def spy(raw: bytes | str) -> dict[str, object]:
        seen.append(threading.current_thread().name)
        return real(raw)

    monkeypatch.setattr(body_module, "json_object", spy)

    async def go() -> None:
        await decoder.decode(orjson.dumps({"input": "x" * 100}))
        # An agent's replay: large in bytes, few values (cheap to parse): on the loop.
        await decoder.decode(orjson.dumps({"input": [{"text": "y" * 4000} for _ in range(100)]}))
        await decoder.decode(orjson.dumps({"input": "x" * (INLINE_PARSE_BYTES + 1)}))
        await decoder.decode(orjson.dumps({"input": [0] * (INLINE_PARSE_VALUES + 1)}))  # 32 KB, many values

    asyncio.run(go())
    decoder.close()
    assert seen[:2] == [threading.current_thread().name] * 2
    assert seen[2].startswith("body-decoder") and seen[3].startswith("body-decoder")
    assert decoder.offloaded == 2
