"""Chat Completions clients against the echo server on loopback: the Agents SDK's
``OpenAIChatCompletionsModel``, LangChain's ``ChatOpenAI`` and LiteLLM's ``completion``.

LiteLLM runs from its own virtualenv (``make litellm-client``, docs/chat-completions.md#chat-completions):
its releases that accept ``openai`` 3 (which ``openai-agents`` needs) require a ``certifi``
newer than the package index this project is tested against holds.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import openai
import pytest
from pydantic import BaseModel
from support.lazy import lazy_import
from support.paths import ROOT

agents = lazy_import("agents")
langchain_openai = lazy_import("langchain_openai")

LITELLM_PYTHON = Path(os.environ.get("LITELLM_PYTHON", ROOT / ".venv-litellm" / "bin" / "python"))


class Trip(BaseModel):
    city: str
    days: int


# -- the Agents SDK ---------------------------------------------------------------------------------


@pytest.fixture
async def chat_model(echo_server):  # type: ignore[no-untyped-def]
    agents.set_tracing_disabled(True)  # no trace uploads to OpenAI from tests
    async with openai.AsyncOpenAI(
        base_url=echo_server.base_url + "/v1", api_key="unused", max_retries=0
    ) as client:
        yield agents.OpenAIChatCompletionsModel(model="gpt-oss", openai_client=client)


async def test_agents_sdk_chat_model_runs_a_tool_using_agent(chat_model) -> None:  # type: ignore[no-untyped-def]
    calls: list[str] = []

    @agents.function_tool
    def get_weather(city: str) -> str:
        """The weather in a city."""
        calls.append(city)
        return f"sunny in {city}"

    agent = agents.Agent(
        name="forecaster", instructions="Answer with the weather.", model=chat_model, tools=[get_weather]
    )
    result = await agents.Runner.run(agent, "Paris")  # echo: a call to the first declared function
    assert calls == ["Paris"]
    assert result.final_output == "get_weather returned: sunny in Paris"
    # Streamed, the same run (the SDK reads our chunks: tool call deltas, then the answer).
    streamed = agents.Runner.run_streamed(agent, 'call get_weather {"city": "Oslo"}')
    async for _ in streamed.stream_events():
        pass
    assert calls == ["Paris", "Oslo"] and streamed.final_output == "get_weather returned: sunny in Oslo"


async def test_agents_sdk_chat_model_output_type(chat_model) -> None:  # type: ignore[no-untyped-def]
    agent = agents.Agent(name="planner", instructions="Plan trips.", model=chat_model, output_type=Trip)
    result = await agents.Runner.run(agent, "Lyon")
    assert result.final_output == Trip(city="Lyon", days=0)


# -- LangChain -------------------------------------------------------------------------------------


@pytest.fixture
def llm(echo_server):  # type: ignore[no-untyped-def]
    return langchain_openai.ChatOpenAI(
        model="gpt-oss", base_url=echo_server.base_url + "/v1", api_key="unused", max_retries=0
    )


def test_langchain_invoke_and_stream(llm) -> None:  # type: ignore[no-untyped-def]
    assert llm.invoke("Hello LangChain").content == "Hello LangChain"
    text = "".join(str(chunk.content) for chunk in llm.stream("#lorem 7"))
    assert len(text.split()) == 7


def test_langchain_bind_tools(llm) -> None:  # type: ignore[no-untyped-def]
    def get_weather(city: str) -> str:
        """The weather in a city."""
        return "sunny"

    message = llm.bind_tools([get_weather]).invoke("Paris")
    (call,) = message.tool_calls
    assert (
        call["name"] == "get_weather" and call["args"] == {"city": "Paris"} and call["id"].startswith("call_")
    )
    chunks = list(llm.bind_tools([get_weather], tool_choice="get_weather").stream("Rome"))
    merged = chunks[0]
    for chunk in chunks[1:]:
        merged += chunk
    assert merged.tool_calls[0]["args"] == {"city": "Rome"}


def test_langchain_with_structured_output(llm) -> None:  # type: ignore[no-untyped-def]
    assert llm.with_structured_output(Trip).invoke("Nice") == Trip(city="Nice", days=0)
    as_tool = llm.with_structured_output(Trip, method="function_calling").invoke("Metz")
    assert as_tool == Trip(city="Metz", days=0)  # a forced call: its arguments, the minimal instance


# -- LiteLLM ----------------------------------------------------------------------------------------

_LITELLM_SCRIPT = r"""
import json, os, sys
os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"   # never fetch the cost map
import litellm
base = sys.argv[1]
kw = dict(model="openai/gpt-oss", api_base=base, api_key="unused")
out = {}
r = litellm.completion(messages=[{"role": "user", "content": "Hello LiteLLM"}], **kw)
out["content"] = r.choices[0].message.content
out["reasoning"] = r.choices[0].message.reasoning_content
out["finish"] = r.choices[0].finish_reason
out["usage"] = r.usage.completion_tokens
tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
r = litellm.completion(messages=[{"role": "user", "content": "Paris"}], tools=tools, **kw)
call = r.choices[0].message.tool_calls[0]
out["call"] = [call.function.name, json.loads(call.function.arguments)]
text = ""
for chunk in litellm.completion(messages=[{"role": "user", "content": "#lorem 6"}], stream=True, **kw):
    text += chunk.choices[0].delta.content or ""
out["streamed"] = text
print(json.dumps(out))
"""


def test_litellm_completion(echo_server) -> None:  # type: ignore[no-untyped-def]
    if not LITELLM_PYTHON.exists():
        pytest.skip("LiteLLM's virtualenv is not installed: run `make litellm-client`")
    done = subprocess.run(
        [str(LITELLM_PYTHON), "-c", _LITELLM_SCRIPT, echo_server.base_url + "/v1"],
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "PYTHONWARNINGS": "ignore"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["content"] == "Hello LiteLLM" and out["reasoning"] == "Echoing the user."
    assert out["finish"] == "stop" and out["usage"] > 0
    assert out["call"] == ["get_weather", {"city": "Paris"}]
    assert len(out["streamed"].split()) == 6
