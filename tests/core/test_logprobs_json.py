"""Output text logprobs held as JSON (``core/wire.py``, ``LogprobsJSON``): written as the SDK writes the models.

Issue 30: a message's logprobs were SDK models, ~3 objects and ~0.95 KiB an entry, built, converted and
freed on the event loop at the end of the message. Held as each token's JSON, whatever carries them is
written with that JSON in place, and reads back as the SDK's types.
"""

from __future__ import annotations

import orjson
from openai.types.responses import (
    Response,
    ResponseContentPartDoneEvent,
    ResponseOutputMessage,
    ResponseOutputText,
    ResponseTextDoneEvent,
)
from openai.types.responses import response_output_text as output_text

from trtllm_responses.core import LogprobsJSON, to_dict, to_json

ENTRIES = [
    {
        "token": f"t{i}",
        "bytes": [116, 48 + i],
        "logprob": -0.5 * i,
        "top_logprobs": [{"token": f"a{j}", "bytes": [97, 48 + j], "logprob": -1.0 - j} for j in range(3)],
    }
    for i in range(5)
]


def _held() -> LogprobsJSON:
    """The entries as the stream holds them: one piece per delta (here: 2 tokens, then 3)."""
    held = LogprobsJSON()
    held.append_json(orjson.dumps(ENTRIES[:2])[1:-1], 2)
    held.append_json(orjson.dumps(ENTRIES[2:])[1:-1], 3)
    return held


def _message(logprobs: list[object]) -> ResponseOutputMessage:
    text = ResponseOutputText(type="output_text", text="t0t1t2t3t4", annotations=[], logprobs=[])
    text.__dict__["logprobs"] = logprobs
    return ResponseOutputMessage(
        id="msg_1", type="message", role="assistant", status="completed", content=[text]
    )


def _response(message: ResponseOutputMessage) -> Response:
    return Response.model_validate(
        {
            "id": "resp_1",
            "object": "response",
            "created_at": 1,
            "model": "m",
            "output": [message.model_dump(mode="json")],
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
        }
    ).model_copy(update={"output": [message]})


def test_held_logprobs_count_their_tokens_and_read_back_as_the_sdk_types() -> None:
    held = _held()
    assert len(held) == 5 and held and not LogprobsJSON()
    assert orjson.loads(held.json()) == ENTRIES == held.entries()
    assert [output_text.Logprob.model_validate(e).token for e in held.entries()] == [
        f"t{i}" for i in range(5)
    ]


def test_a_response_is_written_with_its_held_logprobs_as_with_sdk_models() -> None:
    models = [output_text.Logprob.model_validate(e) for e in ENTRIES]
    as_models = orjson.loads(to_json(_response(_message(models))))
    held = _response(_message(_held()))
    as_json = orjson.loads(to_json(held))
    assert as_json == as_models
    assert as_json["output"][0]["content"][0]["logprobs"] == ENTRIES
    assert to_dict(held) == as_models  # parsed, for what reads them in Python
    # A conversation's history reads the text: left out there.
    assert to_dict(held.output[0], logprobs=False)["content"][0]["logprobs"] == []


def test_the_done_events_carrying_them_are_written_in_place() -> None:
    message = _message(_held())
    done = ResponseTextDoneEvent(
        type="response.output_text.done",
        item_id="msg_1",
        output_index=0,
        content_index=0,
        text="t0t1t2t3t4",
        logprobs=[],
        sequence_number=7,
    )
    done.__dict__["logprobs"] = _held()
    assert orjson.loads(to_json(done))["logprobs"] == ENTRIES
    part = ResponseContentPartDoneEvent(
        type="response.content_part.done",
        item_id="msg_1",
        output_index=0,
        content_index=0,
        part=message.content[0],  # type: ignore[arg-type]
        sequence_number=8,
    )
    assert orjson.loads(to_json(part))["part"]["logprobs"] == ENTRIES
