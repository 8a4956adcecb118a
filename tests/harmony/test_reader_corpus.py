"""The corpus of what gpt-oss writes (``reader_corpus.py``), replayed through a real server.

Every case goes through the echo executor's ``#harmony`` raw mode, streamed and not: the
stream passes the event grammar (SDK-valid events, one terminal event), streaming and
non-streaming give the same items, and the items are what the model meant. The defects of
issue 17's "Why" are also replayed on the TensorRT-LLM executor (the fake, whose "model" is the
echo's completions and which, like TensorRT-LLM, keeps stop tokens out of the output), and the
JSON answer under a response schema is read with the openai SDK's ``responses.parse``.
"""

from __future__ import annotations

from typing import Any

import httpx
import openai
import pytest
from pydantic import BaseModel
from support.harmony_servers import server_for
from support.reader_corpus import CORPUS, JSON_FORMAT, WEATHER, Case, matches, summarize
from support.server_harness import RunningServer, stream_events
from support.stream_grammar import check_stream


def _body(case: Case) -> dict[str, Any]:
    body: dict[str, Any] = {"input": "#harmony\n" + case.completion, "tools": case.tools}
    if case.text is not None:
        body["text"] = case.text
    if case.max_output_tokens is not None:
        body["max_output_tokens"] = case.max_output_tokens
    return body


def _check(case: Case, response: dict[str, Any]) -> None:
    got = [summarize(item) for item in response["output"]]
    assert response["status"] == case.status, (case.name, response.get("error"), got)
    assert len(got) == len(case.items) and all(
        matches(want, have) for want, have in zip(case.items, got, strict=True)
    ), f"{case.name} ({case.source}): {got}"


def _replay(base_url: str, case: Case) -> tuple[dict[str, Any], dict[str, Any]]:
    with httpx.Client(base_url=base_url, timeout=60) as client:
        streamed = check_stream(stream_events(client, _body(case)))
        plain = client.post("/v1/responses", json=_body(case))
        assert plain.status_code == 200, plain.text
    return streamed, plain.json()


@pytest.mark.parametrize("case", CORPUS, ids=lambda c: c.name)
def test_corpus_case_reads_as_the_model_meant(server: RunningServer, case: Case) -> None:
    streamed, plain = _replay(server.base_url, case)
    _check(case, streamed)
    _check(case, plain)
    assert [summarize(i) for i in streamed["output"]] == [summarize(i) for i in plain["output"]]
    if case.status == "failed":
        assert "could not be read as Harmony" in streamed["error"]["message"]


#: The defects of issue 17's "Why", one case each, replayed on the TensorRT-LLM executor too.
DEFECTS = [
    "llamacpp_junk_channel_before_answer",  # 1: a junk header before the answer
    "production_final_without_message_token",  # 1: a header without <|message|>
    "refusal_without_header",  # 1
    "repeated_start",  # 1
    "vllm_final_with_json_content_type",  # 2
    "harmony_simple_tool_call_bare_name",  # 3
    "hallucinated_repo_browser",  # 4
    "python_not_run",  # 4
    "glued_json",  # 5
    "prose_after_arguments",  # 5
    "end_then_return",  # 5
    "final_closed_by_end",  # 5
    "call_closed_by_end",  # 5
]


@pytest.mark.parametrize("name", DEFECTS)
def test_defect_is_fixed_on_the_trtllm_executor(trtllm_server: RunningServer, name: str) -> None:
    case = next(c for c in CORPUS if c.name == name)
    streamed, plain = _replay(trtllm_server.base_url, case)
    _check(case, streamed)
    _check(case, plain)


class Place(BaseModel):
    city: str


@pytest.mark.parametrize("which", ["echo", "trtllm"])
def test_final_with_json_content_type_is_parsed_by_the_sdk(
    request: pytest.FixtureRequest, which: str
) -> None:
    """vllm#45570: ``<|channel|>final <|constrain|>json<|message|>`` under a json_schema is the answer."""
    running = server_for(request, which)
    completion = '<|channel|>final <|constrain|>json<|message|>{"city":"Paris"}<|return|>'
    with openai.OpenAI(base_url=f"{running.base_url}/v1", api_key="unused") as client:
        parsed = client.responses.parse(model="gpt-oss", input="#harmony\n" + completion, text_format=Place)
        assert parsed.status == "completed"
        assert parsed.output_text == '{"city":"Paris"}'
        assert parsed.output_parsed == Place(city="Paris")
        with client.responses.stream(
            model="gpt-oss", input="#harmony\n" + completion, text_format=Place
        ) as stream:
            final = stream.get_final_response()
        assert final.output_parsed == Place(city="Paris")


def test_json_format_is_kept_and_junk_header_recovered_together(server: RunningServer) -> None:
    """A junk header, then the JSON answer with its content type: the answer, streamed and not."""
    case = Case(
        "junk_then_json",
        "issue 17 Done when",
        '<|channel|>??<|end|><|start|>assistant<|channel|>final <|constrain|>json<|message|>{"city":"Metz"}<|return|>',
        "completed",
        [("message", '{"city":"Metz"}')],
        tools=[WEATHER],
        text=JSON_FORMAT,
    )
    streamed, plain = _replay(server.base_url, case)
    _check(case, streamed)
    _check(case, plain)
