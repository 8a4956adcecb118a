"""Steering: user input queued for a running response (docs/agents-and-long-sessions.md#websocket-mode: steering).

Pure decisions over one connection's runs; the WebSocket transport sends what they return.
``submit`` accepts input for a running response (its run then stops at the next Harmony message
boundary, ``steered``) or refuses it with a code; ``after`` decides what a response's end means
for the input it was given: fail it, hold it until the client sends the outputs of the calls
the response made, or continue in a successor that commits it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..core import new_id
from .run import ResponseRun

__all__ = [
    "MAX_PENDING_STEERS",
    "MAX_REMEMBERED",
    "Held",
    "Steer",
    "SteerRefused",
    "Steered",
    "Steering",
    "Successor",
    "as_items",
]

#: Steering submissions queued for one response, at most.
MAX_PENDING_STEERS = 16
#: Finished responses (for ``response_already_completed``) and held steering remembered per connection.
MAX_REMEMBERED = 64


@dataclass(frozen=True, slots=True)
class Steer:
    """One steering submission: its id (``""`` until accepted), the response it steers, its input."""

    id: str
    previous_response_id: str
    input: Any  # as the client sent it
    items: tuple[dict[str, Any], ...] = ()  # as input items


@dataclass(frozen=True, slots=True)
class SteerRefused:
    """A submission (or a committed one) that cannot be applied: ``response.steer.failed``."""

    steer: Steer
    code: str
    message: str
    stream_id: str | None
    allocated: bool = True  # the steer had been given an id (the event names it)


@dataclass(slots=True)
class Steered:
    """A running response of the connection, and the steering queued for it."""

    run: ResponseRun
    body: dict[str, Any]
    stream_id: str | None
    steers: list[Steer] = field(default_factory=list)

    @property
    def response_id(self) -> str:
        return self.run.id


@dataclass(frozen=True, slots=True)
class Held:
    """The response ended on client calls: its steering waits for their outputs
    (``response.steer.pending``), prepended to the ``response.create`` that sends them."""

    steers: tuple[Steer, ...]
    required_input: tuple[dict[str, Any], ...]


@dataclass(frozen=True, slots=True)
class Successor:
    """A ``response.create`` to run next on the lane, committing ``steers``."""

    body: dict[str, Any]
    steers: tuple[Steer, ...]


class Steering:
    """One connection's running responses and the steering queued for them."""

    def __init__(self) -> None:
        self._running: dict[str, Steered] = {}
        self._held: dict[str, list[Steer]] = {}  # by the response whose call outputs they wait for
        self._finished: dict[str, None] = {}  # oldest dropped first

    def begin(self, run: ResponseRun, body: dict[str, Any], stream_id: str | None) -> Steered:
        """``run`` is running on this connection: it may be steered until ``end``."""
        steered = Steered(run, body, stream_id)
        self._running[run.id] = steered
        return steered

    def end(self, steered: Steered) -> None:
        del self._running[steered.response_id]
        _remember(self._finished, steered.response_id, None)

    def find(self, response_id: str) -> Steered | None:
        """The response running on this connection with that id (``response.inject``'s target), if any."""
        return self._running.get(response_id)

    def finished(self, response_id: str) -> bool:
        """Whether a response of this connection with that id has ended (among the last ones kept)."""
        return response_id in self._finished

    def held_for(self, previous_response_id: Any) -> list[Steer]:
        """Steering held for the response a ``response.create`` continues (taken: it commits them)."""
        return self._held.pop(previous_response_id, []) if isinstance(previous_response_id, str) else []

    def submit(self, target: str, steer_input: Any) -> tuple[Steer, str | None] | SteerRefused:
        """``response.steer`` for ``target``: the accepted steer and its lane, or why not."""
        steered = self._running.get(target)
        stream_id = steered.stream_id if steered is not None else None
        unallocated = Steer("", target, steer_input)
        problem = _check_steer_input(steer_input)
        if problem is not None:
            return SteerRefused(unallocated, "invalid_input", problem, stream_id, allocated=False)
        if steered is None:
            if target in self._finished:
                code, message = "response_already_completed", f"Response '{target}' has already finished."
            else:
                code, message = (
                    "response_not_found",
                    f"Response '{target}' is not running on this connection.",
                )
            return SteerRefused(unallocated, code, message, None, allocated=False)
        if steered.body.get("context_management"):  # as OpenAI: compacting responses are not steered
            return SteerRefused(
                unallocated,
                "steering_not_supported",
                "Responses using automatic compaction (context_management) do not support steering.",
                stream_id,
                allocated=False,
            )
        if len(steered.steers) >= MAX_PENDING_STEERS:
            return SteerRefused(
                unallocated,
                "too_many_pending_steers",
                f"At most {MAX_PENDING_STEERS} steering submissions can wait for one response.",
                stream_id,
                allocated=False,
            )
        steer = Steer(new_id("steer"), target, steer_input, tuple(as_items(steer_input)))
        steered.steers.append(steer)
        steered.run.stop_at_boundary("steered")
        return steer, stream_id

    def after(self, final: dict[str, Any], steered: Steered) -> Held | Successor | Sequence[SteerRefused]:
        """What the end of ``steered`` (its terminal response ``final``) does to its queued steering."""
        steers = tuple(steered.steers)
        if final["status"] == "failed":
            return [
                SteerRefused(s, "response_not_active", "The response failed.", steered.stream_id)
                for s in steers
            ]
        if not steers:
            return ()
        calls = [item for item in final["output"] if item.get("type") == "function_call"]
        if final["status"] == "completed" and calls:
            _remember(self._held, final["id"], list(steers))
            required = tuple(
                {"type": "function_call_output", "call_id": c["call_id"], "name": c["name"]} for c in calls
            )
            return Held(steers, required)
        body = {
            **steered.body,
            "type": "response.create",
            "previous_response_id": final["id"],
            "input": [item for s in steers for item in s.items],
        }
        return Successor(body, steers)


def as_items(value: Any) -> list[dict[str, Any]]:
    """Input (a string or items) as a list of items."""
    if isinstance(value, str):
        return [{"type": "message", "role": "user", "content": value}]
    return list(value) if isinstance(value, list) else []


def _remember(bounded: dict[str, Any], key: str, value: Any) -> None:
    """Insert into a per-connection memory, forgetting the oldest entry past MAX_REMEMBERED."""
    bounded[key] = value
    if len(bounded) > MAX_REMEMBERED:
        del bounded[next(iter(bounded))]


def _check_steer_input(value: Any) -> str | None:
    """Why steering input is not acceptable (user messages only), or None."""
    if isinstance(value, str):
        return None if value else "Steering input must not be empty."
    if not isinstance(value, list) or not value:
        return "Steering input must be a string or a non-empty list of user messages."
    for i, item in enumerate(value):
        if (
            not isinstance(item, dict)
            or item.get("role") != "user"
            or item.get("type", "message") != "message"
        ):
            return f"input[{i}]: steering accepts only user messages."
        extra = set(item) - {"type", "role", "content"}
        if extra:
            return f"input[{i}]: steering messages may hold only type, role and content, not {sorted(extra)}."
    return None
