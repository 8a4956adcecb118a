"""Server-Sent Events framing: ``event: <type>`` / ``data: <json>`` / blank line. Only here."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

from openai.types.responses import ResponseStreamEvent

from ..wire import to_json

__all__ = ["encode_events", "sse_stream"]

_prefixes: dict[str, bytes] = {}


def _prefix(event_type: str) -> bytes:
    prefix = _prefixes.get(event_type)
    if prefix is None:
        prefix = _prefixes[event_type] = b"event: " + event_type.encode() + b"\ndata: "
    return prefix


def encode_events(events: Sequence[ResponseStreamEvent]) -> bytes:
    """One SSE frame per event, concatenated (one write per engine step)."""
    return b"".join([_prefix(e.type) + to_json(e) + b"\n\n" for e in events])


async def sse_stream(steps: AsyncIterator[Sequence[ResponseStreamEvent]]) -> AsyncIterator[bytes]:
    """SSE bytes for each step's events; closes ``steps`` when done or abandoned."""
    try:
        async for events in steps:
            yield encode_events(events)
    finally:
        aclose = getattr(steps, "aclose", None)
        if aclose is not None:
            await aclose()
