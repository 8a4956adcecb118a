"""The structured-output models the client tests ask for (a trip of stops): one definition for the
openai SDK's ``responses.parse`` and the Agents SDK's ``output_type``."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel


class Stop(BaseModel):
    city: str
    mode: Literal["train", "bus"]
    nights: int | None


class Trip(BaseModel):
    name: str
    stops: list[Stop]
