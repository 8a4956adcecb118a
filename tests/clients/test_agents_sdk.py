"""The OpenAI Agents SDK (``openai-agents``) against the echo server: structured ``output_type`` and tools."""

from __future__ import annotations

import openai
import pytest
from pydantic import BaseModel
from support.lazy import lazy_import
from support.trip_models import Trip

agents = lazy_import("agents")


class Address(BaseModel):
    street: str
    zip_code: int | None


@pytest.fixture
async def model(echo_server):  # type: ignore[no-untyped-def]
    agents.set_tracing_disabled(True)  # no trace uploads to OpenAI from tests
    async with openai.AsyncOpenAI(
        base_url=echo_server.base_url + "/v1", api_key="unused", max_retries=0
    ) as client:
        yield agents.OpenAIResponsesModel(model="gpt-oss", openai_client=client)


async def test_output_type_gets_parsed_output(model) -> None:  # type: ignore[no-untyped-def]
    agent = agents.Agent(name="planner", instructions="Plan trips.", model=model, output_type=Trip)
    result = await agents.Runner.run(agent, "Lyon")
    assert result.final_output == Trip(name="Lyon", stops=[])


async def test_function_tool_with_a_model_argument_round_trip(model, echo_server) -> None:  # type: ignore[no-untyped-def]
    seen: list[Address] = []

    @agents.function_tool
    def save_address(address: Address) -> str:
        """Save an address."""
        seen.append(address)
        return "saved"

    agent = agents.Agent(name="clerk", instructions="File things.", model=model, tools=[save_address])
    result = await agents.Runner.run(
        agent, 'call save_address {"address": {"street": "Main St", "zip_code": 75001}}'
    )
    assert seen == [Address(street="Main St", zip_code=75001)]
    assert result.final_output == "save_address returned: saved"
