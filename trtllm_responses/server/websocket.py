"""WebSocket mode on ``/v1/responses``: one persistent socket per agent, the same ``drive`` as HTTP.

A transport, nothing more: each ``response.create`` message is prepared and
driven by ``ResponsesService`` exactly as a streaming POST is, and every
engine step's events go out as JSON text messages (one per event), with the
grammar of the SSE stream. What is WebSocket-only lives here:

- **Lanes.** Responses of one ``stream_id`` (or of none) run one at a time, in
  the order they were sent; their events echo the ``stream_id``.
- **Connection-local state.** The last response of each lane keeps its
  conversation (token-level), so ``previous_response_id`` continues it in
  O(new input) even with ``store: false``. An id neither here nor in the store is
  ``previous_response_not_found``; a continuation that fails evicts the id it
  continued (it must be re-sent in full or from the store).
- **Errors** are ``{"type": "error", "status", "error": {...}}`` events; the socket
  stays usable. ``stream: false`` and ``background: true`` in ``response.create`` are
  errors (``stream: true`` is redundant and ignored: the Agents SDK sends it).
- **Steering.** ``response.steer`` queues user input for the running response
  (``response.steer.accepted``); the response stops at the next Harmony message
  boundary (``response.incomplete``, reason ``steered``), or ends on its own, and a
  successor continuing it with the queued input starts at once (its
  ``response.created`` commits the input). A response that stops for a client tool
  call keeps the input queued (``response.steer.pending`` after
  ``response.completed``); the next ``response.create`` continuing it gets the
  queued input prepended. Input that cannot be applied comes back in
  ``response.steer.failed``.
- **Preparing.** ``generate: false`` prepares a response without output: its conversation is
  kept (and stored with ``store: true``) and its prompt is prefilled in the engine, so a later
  ``response.create`` continuing it with ``previous_response_id`` pays only its new input.
- **Draining.** At shutdown the server hands the connection :data:`~.websocket_drain.DRAIN`:
  responses already running finish, requests not started get an error event coded
  ``server_restarting``, then the socket closes with 1012, which the SDK reconnects on.
- **Limits.** A connection is closed after ``websocket_max_seconds`` with an
  error event coded ``websocket_connection_limit_reached``. A client that
  disconnects cancels its responses, which aborts their generations. Budgets
  (README, "Hostile input and limits"): a message over ``--max_input_bytes`` is
  refused before it is parsed (uvicorn's ``ws_max_size``, set a little above it by
  ``http_protocol.uvicorn_config``, closes the socket (1009) for one far over,
  compressed or not, before it is buffered); queued ``response.create`` messages
  are kept as the text received (parsed again when their turn comes), at most
  ``MAX_QUEUED_INPUTS`` × ``--max_input_bytes`` of them per connection; a
  ``stream_id`` is at most ``MAX_STREAM_ID`` characters.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson
from openai.types.responses import ResponseStreamEvent
from starlette.types import Receive, Scope, Send

from ..adapter.adapter import ConversationHistory
from ..core.errors import APIError, InvalidRequestError, ServerError, ServiceUnavailableError
from ..core.ids import new_id
from ..core.wire import to_dict
from ..request.protocol import check_depth
from ..responses.service import PreparedResponse, ResponsesService
from .config import ServerConfig
from .sse import event_json
from .websocket_drain import DRAIN, SERVICE_RESTART

__all__ = ["serve_websocket"]

logger = logging.getLogger(__name__)

#: Steering submissions queued for one response, at most.
MAX_PENDING_STEERS = 16
#: Lanes (``stream_id`` values) one connection may open, and requests queued on one lane, at most.
MAX_LANES = 16
MAX_QUEUED = 64
#: Finished responses (for ``response_already_completed``) and held steering remembered per connection.
MAX_REMEMBERED = 64
#: Longest ``stream_id`` (characters); events echo it, so it is kept short.
MAX_STREAM_ID = 128
#: Bytes of ``response.create`` messages waiting on one connection's lanes, in ``--max_input_bytes``.
MAX_QUEUED_INPUTS = 4
# Over WebSocket a response always streams and never runs in the background. ``stream: true`` is
# redundant and accepted (the Agents SDK sends it); ``stream: false`` and ``background: true`` are errors.
_NOT_IN_CREATE = {
    "stream": (False, "'stream' is implicit over WebSocket (every response streams); do not send false."),
    "background": (True, "Background responses are not supported over WebSocket."),
}


@dataclass
class _Steer:
    id: str
    previous_response_id: str
    input: Any  # as the client sent it
    items: list[dict[str, Any]]  # as input items


@dataclass
class _Running:
    """The response a lane is generating, and the steering input queued for it."""

    response_id: str
    body: dict[str, Any]
    stream_id: str | None
    steers: list[_Steer] = field(default_factory=list)

    def stop_reason(self) -> str | None:
        return "steered" if self.steers else None


class _SocketClosed(Exception):
    """Sending failed: the client is gone (the read loop will see the disconnect and stop the lanes)."""


#: A response.create to run next on a lane, and the steering submissions it commits.
_Successor = tuple[dict[str, Any], Sequence[_Steer]]


class ResponsesSocket:
    """One WebSocket connection: its lanes, its connection-local conversations, its steering queues."""

    def __init__(self, service: ResponsesService, config: ServerConfig, receive: Receive, send: Send) -> None:
        self.service = service
        self.config = config
        self._receive = receive
        self._send = send
        self._send_lock = asyncio.Lock()
        self._lanes: dict[str | None, asyncio.Queue[str | bytes]] = {}
        self._queued_bytes = 0  # of the messages waiting on the lanes (kept as received, not parsed)
        self._workers: list[asyncio.Task[None]] = []
        # lane -> (response id, its conversation); the last response of each lane.
        self._local: dict[str | None, tuple[str, ConversationHistory]] = {}
        self._running: dict[str, _Running] = {}
        # Steering queued for a response awaiting tool output, and finished ids (oldest dropped first).
        self._pending: dict[str, list[_Steer]] = {}
        self._finished: dict[str, None] = {}
        self._sequence = 0  # for connection-level events (steering), apart from response streams
        # Draining (server shutdown): requests being handled now, and set once none is.
        self._draining = False
        self._active = 0
        self._idle = asyncio.Event()
        self._idle.set()

    # -- sending ----------------------------------------------------------------------------

    async def _send_text(self, payloads: Sequence[bytes]) -> None:
        async with self._send_lock:
            try:
                for payload in payloads:
                    await self._send({"type": "websocket.send", "text": payload.decode()})
            except asyncio.CancelledError:
                raise
            except (
                Exception
            ) as exc:  # the server's own "client gone" error (uvicorn's ClientDisconnected, ...)
                raise _SocketClosed() from exc

    async def _send_event(self, event: dict[str, Any], stream_id: str | None = None) -> None:
        if stream_id is not None:
            event["stream_id"] = stream_id
        await self._send_text([orjson.dumps(event)])

    async def _send_error(self, error: APIError, stream_id: str | None = None) -> None:
        body = error.to_dict()
        await self._send_event({"type": "error", "status": error.status_code, **body}, stream_id)

    def _connection_event(self, event_type: str, **fields: Any) -> dict[str, Any]:
        event = {"type": event_type, "sequence_number": self._sequence, **fields}
        self._sequence += 1
        return event

    # -- the connection ---------------------------------------------------------------------

    async def run(self) -> None:
        """Accept, serve messages until the client leaves or the time limit, then cancel what runs."""
        message = await self._receive()
        if message["type"] != "websocket.connect":
            return
        await self._send({"type": "websocket.accept"})
        logger.debug("WebSocket connection opened")
        limit = self.config.websocket_max_seconds
        try:
            await asyncio.wait_for(self._read_loop(), timeout=limit)
        except asyncio.TimeoutError:
            await self._stop_workers()
            with contextlib.suppress(Exception):
                await self._send_error(
                    InvalidRequestError(
                        f"This WebSocket connection reached its limit of {limit:g} seconds; open a new one "
                        "and continue with previous_response_id.",
                        code="websocket_connection_limit_reached",
                    )
                )
                await self._send({"type": "websocket.close", "code": 1000})
            return
        finally:
            await self._stop_workers()
            logger.debug("WebSocket connection closed")

    async def _stop_workers(self) -> None:
        for task in self._workers:
            task.cancel()
        for task in self._workers:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._workers.clear()

    async def _read_loop(self) -> None:
        while True:
            message = await self._receive()
            kind = message["type"]
            if kind == "websocket.disconnect":
                return
            if kind == DRAIN:
                with contextlib.suppress(_SocketClosed):
                    await self._drain()
                continue
            if kind != "websocket.receive":
                continue
            raw = message.get("text")
            if raw is None:
                raw = message.get("bytes") or b""
            await self._on_message(raw)

    async def _on_message(self, raw: str | bytes) -> None:
        limit = self.service.max_input_bytes
        if len(raw) > limit:  # characters <= bytes: a text message this long is over the limit too
            await self._send_error(
                InvalidRequestError(
                    f"The message is larger than {limit} bytes (--max_input_bytes).",
                    code="context_length_exceeded",
                )
            )
            return
        try:
            data = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            await self._send_error(InvalidRequestError(f"The message is not valid JSON: {exc}"))
            return
        if not isinstance(data, dict):
            await self._send_error(InvalidRequestError("A message must be a JSON object."))
            return
        try:
            check_depth(data)
        except APIError as exc:
            await self._send_error(exc)
            return
        kind = data.get("type")
        if kind == "response.create" and self._draining:
            stream_id = data.get("stream_id")
            echoed = stream_id if isinstance(stream_id, str) and len(stream_id) <= MAX_STREAM_ID else None
            await self._send_error(_restarting(), echoed)
        elif kind == "response.create":
            stream_id = data.get("stream_id")
            if stream_id is not None and (not isinstance(stream_id, str) or len(stream_id) > MAX_STREAM_ID):
                await self._send_error(
                    InvalidRequestError(
                        f"'stream_id' must be a string of at most {MAX_STREAM_ID} characters.",
                        param="stream_id",
                    )
                )
                return
            lane = self._lanes.get(stream_id)
            if lane is None:
                if len(self._lanes) >= MAX_LANES:
                    await self._send_error(
                        InvalidRequestError(
                            f"A connection can use at most {MAX_LANES} stream_id lanes.", param="stream_id"
                        ),
                        stream_id,
                    )
                    return
                lane = self._lanes[stream_id] = asyncio.Queue()
                self._workers.append(asyncio.ensure_future(self._lane_worker(stream_id, lane)))
            if lane.qsize() >= MAX_QUEUED:
                await self._send_error(
                    InvalidRequestError(
                        f"At most {MAX_QUEUED} responses can wait on one lane; wait for some to finish.",
                        code="too_many_requests",
                    ),
                    stream_id,
                )
                return
            budget = MAX_QUEUED_INPUTS * limit
            if self._queued_bytes + len(raw) > budget:
                await self._send_error(
                    InvalidRequestError(
                        f"The responses waiting on this connection hold more than {budget} bytes; wait for "
                        "some to finish.",
                        code="too_many_requests",
                    ),
                    stream_id,
                )
                return
            del data  # what waits is the text received; it is parsed again when its turn comes
            self._queued_bytes += len(raw)
            lane.put_nowait(raw)
        elif kind == "response.steer":
            await self._on_steer(data)
        else:
            await self._send_error(
                InvalidRequestError(
                    f"Unknown message type {kind!r}; send response.create or response.steer.",
                    param="type",
                    code="unknown_event_type",
                )
            )

    # -- responses --------------------------------------------------------------------------

    async def _lane_worker(self, stream_id: str | None, lane: asyncio.Queue[str | bytes]) -> None:
        while True:
            raw = await lane.get()
            self._queued_bytes -= len(raw)
            request: _Successor | None = (orjson.loads(raw), ())  # kept as received while it waited
            del raw
            self._active += 1
            self._idle.clear()
            try:
                await self._run_lane_request(request, stream_id)
            except _SocketClosed:  # the client left mid-response; drive aborted the generation
                return
            finally:
                self._active -= 1
                if not self._active:
                    self._idle.set()

    async def _run_lane_request(self, request: _Successor | None, stream_id: str | None) -> None:
        """One request of a lane, then the successors steering asks for."""
        while request is not None:
            if self._draining:
                await self._send_error(_restarting(), stream_id)
                for steer in request[1]:
                    await self._steer_failed(
                        steer, "successor_creation_failed", "The server is restarting.", stream_id
                    )
                return
            try:
                request = await self._create(request[0], stream_id, request[1])
            except (asyncio.CancelledError, _SocketClosed):
                raise
            except Exception:  # never let one response take the lane down
                request = None
                logger.exception("Unhandled error on a WebSocket response")
                with contextlib.suppress(Exception):  # the socket itself may be what failed
                    await self._send_error(
                        ServerError("The server had an error while processing your request."), stream_id
                    )

    async def _drain(self) -> None:
        """The server is shutting down: refuse what has not started, let what runs end, then close 1012."""
        if self._draining:
            return
        self._draining = True
        for stream_id, lane in self._lanes.items():
            while not lane.empty():
                self._queued_bytes -= len(lane.get_nowait())
                await self._send_error(_restarting(), stream_id)
        self._workers.append(asyncio.ensure_future(self._close_when_idle()))

    async def _close_when_idle(self) -> None:
        await self._idle.wait()
        logger.debug("WebSocket connection drained; closing with %d", SERVICE_RESTART)
        with contextlib.suppress(Exception):
            await self._send(
                {"type": "websocket.close", "code": SERVICE_RESTART, "reason": "server restarting"}
            )

    def _lookup(self, response_id: str) -> ConversationHistory | None:
        for local_id, history in self._local.values():
            if local_id == response_id:
                return history
        return None

    def _evict(self, response_id: str | None) -> None:
        if response_id is None:
            return
        for lane, (local_id, _) in list(self._local.items()):
            if local_id == response_id:
                del self._local[lane]

    async def _create(
        self, data: dict[str, Any], stream_id: str | None, steers: Sequence[_Steer] = ()
    ) -> _Successor | None:
        """Prepare and drive one response; the successor steering asks for, if any.

        ``steers`` are the submissions this response commits (a successor's).
        """
        received = time.perf_counter()
        body = {k: v for k, v in data.items() if k not in ("type", "stream_id")}
        previous = body.get("previous_response_id")
        try:
            for name, (refused, message) in _NOT_IN_CREATE.items():
                if body.get(name) is refused:
                    raise InvalidRequestError(message, param=name)
            body.pop("stream", None)
            generate = body.pop("generate", None)
            if generate is not None and not isinstance(generate, bool):
                raise InvalidRequestError("'generate' must be a boolean.", param="generate")
            queued = self._pending.pop(previous, []) if isinstance(previous, str) else []
            if queued:  # steering held while this response waited for tool output: prepend it
                steers = [*steers, *queued]
                body["input"] = [item for s in queued for item in s.items] + _as_items(body.get("input", []))
            prepared = await self.service.prepare(body, received, lookup=self._lookup)
            prepared.generate = generate is not False
        except APIError as exc:
            self._evict(previous if isinstance(previous, str) else None)
            await self._send_error(exc, stream_id)
            for steer in steers:
                await self._steer_failed(steer, "successor_creation_failed", exc.message, stream_id)
            return None
        running = _Running(prepared.response.id, body, stream_id)
        self._running[running.response_id] = running
        prepared.stop_requested = running.stop_reason

        async def deliver(events: list[ResponseStreamEvent]) -> None:
            payloads = [event_json(e) for e in events]
            if stream_id is not None:
                suffix = b',"stream_id":' + orjson.dumps(stream_id) + b"}"
                payloads = [p[:-1] + suffix for p in payloads]
            await self._send_text(payloads)

        try:
            final_json = await self.service.drive(prepared, deliver)
        finally:
            del self._running[running.response_id]
            _remember(self._finished, running.response_id, None)
        final = orjson.loads(final_json)
        return await self._after(prepared, final, running)

    async def _after(
        self, prepared: PreparedResponse, final: dict[str, Any], running: _Running
    ) -> _Successor | None:
        """Remember the conversation, and act on queued steering: hold it, or return the successor."""
        stream_id = running.stream_id
        previous = running.body.get("previous_response_id")
        if final["status"] == "failed":
            self._evict(previous if isinstance(previous, str) else None)
            for steer in running.steers:
                await self._steer_failed(steer, "response_not_active", "The response failed.", stream_id)
            return None
        # The output as the model read it (server-run tools' items with their read fields), as stored.
        stream = prepared.stream
        output = [to_dict(item) for item in stream.model_output] if stream is not None else final["output"]
        self._local[stream_id] = (final["id"], self.service.history_after(prepared, output))
        if not running.steers:
            return None
        calls = [item for item in final["output"] if item.get("type") == "function_call"]
        if final["status"] == "completed" and calls:
            _remember(self._pending, final["id"], running.steers)
            required = [
                {"type": "function_call_output", "call_id": c["call_id"], "name": c["name"]} for c in calls
            ]
            for steer in running.steers:
                event = self._connection_event(
                    "response.steer.pending",
                    reason="waiting_for_required_input",
                    required_input=required,
                    steer={"id": steer.id, "previous_response_id": steer.previous_response_id},
                )
                await self._send_event(event, stream_id)
            return None
        successor = {
            **running.body,
            "type": "response.create",
            "previous_response_id": final["id"],
            "input": [item for s in running.steers for item in s.items],
        }
        return successor, running.steers

    # -- steering ---------------------------------------------------------------------------

    async def _on_steer(self, data: dict[str, Any]) -> None:
        target = data.get("previous_response_id")
        steer_input = data.get("input")
        if not isinstance(target, str):
            await self._send_event(
                self._connection_event(
                    "response.steer.failed",
                    error={
                        "type": "invalid_request_error",
                        "code": "invalid_input",
                        "message": "'previous_response_id' must be a response id.",
                    },
                    steer={"previous_response_id": str(target), "input": steer_input},
                )
            )
            return
        running = self._running.get(target)
        stream_id = running.stream_id if running is not None else None
        problem = _check_steer_input(steer_input)
        if problem is not None:
            steer = _Steer("", target, steer_input, [])
            await self._steer_failed(steer, "invalid_input", problem, stream_id, allocated=False)
            return
        if running is None:
            code, message = (
                ("response_already_completed", f"Response '{target}' has already finished.")
                if target in self._finished
                else ("response_not_found", f"Response '{target}' is not running on this connection.")
            )
            await self._steer_failed(
                _Steer("", target, steer_input, []), code, message, None, allocated=False
            )
            return
        if running.body.get("context_management"):  # as OpenAI: compacting responses are not steered
            await self._steer_failed(
                _Steer("", target, steer_input, []),
                "steering_not_supported",
                "Responses using automatic compaction (context_management) do not support steering.",
                stream_id,
                allocated=False,
            )
            return
        if len(running.steers) >= MAX_PENDING_STEERS:
            await self._steer_failed(
                _Steer("", target, steer_input, []),
                "too_many_pending_steers",
                f"At most {MAX_PENDING_STEERS} steering submissions can wait for one response.",
                stream_id,
                allocated=False,
            )
            return
        steer = _Steer(new_id("steer"), target, steer_input, _as_items(steer_input))
        running.steers.append(steer)
        event = self._connection_event(
            "response.steer.accepted", steer={"id": steer.id, "previous_response_id": target}
        )
        await self._send_event(event, stream_id)

    async def _steer_failed(
        self, steer: _Steer, code: str, message: str, stream_id: str | None, allocated: bool = True
    ) -> None:
        described: dict[str, Any] = {"previous_response_id": steer.previous_response_id, "input": steer.input}
        if allocated and steer.id:
            described["id"] = steer.id
        event = self._connection_event(
            "response.steer.failed",
            error={"type": "invalid_request_error", "code": code, "message": message},
            steer=described,
        )
        await self._send_event(event, stream_id)


def _restarting() -> ServiceUnavailableError:
    return ServiceUnavailableError(
        "The server is restarting; reconnect and send this request again.", code="server_restarting"
    )


def _remember(bounded: dict[str, Any], key: str, value: Any) -> None:
    """Insert into a per-connection memory, forgetting the oldest entry past MAX_REMEMBERED."""
    bounded[key] = value
    if len(bounded) > MAX_REMEMBERED:
        del bounded[next(iter(bounded))]


def _as_items(value: Any) -> list[dict[str, Any]]:
    """Input (a string or items) as a list of items."""
    if isinstance(value, str):
        return [{"type": "message", "role": "user", "content": value}]
    return list(value) if isinstance(value, list) else []


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


async def serve_websocket(
    service: ResponsesService, config: ServerConfig, scope: Scope, receive: Receive, send: Send
) -> None:
    """Serve one WebSocket connection on ``/v1/responses``."""
    await ResponsesSocket(service, config, receive, send).run()
