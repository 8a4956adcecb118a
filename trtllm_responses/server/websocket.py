"""WebSocket mode on ``/v1/responses`` (docs/agents-and-long-sessions.md#websocket-mode): a transport, nothing more.

Each ``response.create`` message is prepared by ``ResponsesService`` and its run driven exactly as a
streaming POST's is; every engine step's events go out as JSON text messages (one per event), with
the SSE stream's grammar. What this module keeps is the connection's: its lanes (one ``stream_id``'s
responses run one at a time, in order), its connection-local conversations (``previous_response_id``
continues the last response of a lane in O(new input), ``store: false`` included), its error events
(the socket stays usable), draining at shutdown (1012 once idle), and its budgets
(docs/limits.md#hostile-input-and-limits). Steering decisions are ``responses/steering.py``'s; this module
sends them.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

import orjson
from openai.types.responses import ResponseStreamEvent
from starlette.types import Receive, Scope, Send

from ..core import (
    APIError,
    AuthenticationError,
    InvalidRequestError,
    ServerError,
    ServiceUnavailableError,
    held_tokens,
    to_dict,
)
from ..ops import tracing
from ..request import NO_IDENTITY, JsonBody, SessionIdentity, multi_agent_beta, session_identity
from ..responses import (
    Chain,
    ClientLeft,
    Held,
    Origin,
    ResponsesService,
    Steer,
    Steered,
    Steering,
    SteerRefused,
    Successor,
    as_items,
)
from ..tenants import OPEN, Tenant, TenantDirectory
from .config import ServerConfig
from .operations import tenant_of
from .spans import continues_client, socket_span, turn_span
from .sse import APART_TOKENS, event_json, written_apart
from .websocket_drain import DRAIN, SERVICE_RESTART

__all__ = ["serve_websocket"]

logger = logging.getLogger(__name__)

#: Lanes (``stream_id`` values) one connection may open, and requests queued on one lane, at most.
MAX_LANES = 16
MAX_QUEUED = 64
#: Longest ``stream_id`` (characters); events echo it, so it is kept short.
MAX_STREAM_ID = 128
#: Bytes of ``response.create`` messages waiting on one connection's lanes, in ``--max_input_bytes``.
MAX_QUEUED_INPUTS = 4
#: The handshake response header that tells Codex the largest ``response.create`` message this server takes
#: (``--max_input_bytes``; a larger one is answered with an error event). Codex reads it from the handshake
#: response, beside ``openai-model`` and ``x-reasoning-included``
#: (docs/agent-clients.md#fields-and-headers-of-newer-clients).
MAX_MESSAGE_HEADER = b"x-codex-websocket-max-message-bytes"
#: Bytes of the conversations one connection remembers for ``previous_response_id`` (its lanes' last
#: responses, ``generate: false`` ones included: their rendered histories), in ``--max_input_bytes``;
#: past it the least recently answered lanes' are forgotten (continuing one is then
#: ``previous_response_not_found`` unless it was stored), never the lane just answered.
MAX_REMEMBERED_INPUTS = 4
# Over WebSocket a response always streams and never runs in the background. ``stream: true`` is
# redundant and accepted (the Agents SDK sends it); ``stream: false`` and ``background: true`` are errors.
_NOT_IN_CREATE = {
    "stream": (False, "'stream' is implicit over WebSocket (every response streams); do not send false."),
    "background": (True, "Background responses are not supported over WebSocket."),
}


class _SocketClosed(ClientLeft):
    """Sending failed: the client is gone (the read loop will see the disconnect and stop the lanes)."""


#: A response.create to run next on a lane (as received and checked, or a successor steering made), and
#: the steering submissions it commits.
_Next = tuple[JsonBody | dict[str, Any], Sequence[Steer]]


class ResponsesSocket:
    """One WebSocket connection: its lanes, its connection-local conversations, its steering queues."""

    def __init__(
        self,
        service: ResponsesService,
        config: ServerConfig,
        receive: Receive,
        send: Send,
        identity: SessionIdentity = NO_IDENTITY,
        multi_agent: bool = False,
        tenant: Tenant = OPEN,
        admitted: Callable[[], bool] | None = None,
        span: tracing.SpanLike = tracing.NULL_SPAN,
        child_turns: bool = False,
    ) -> None:
        """``span``: the connection's (``spans.socket_span``); each turn's span is its child when
        ``child_turns`` (the client traced the handshake), else a trace of its own linked to it."""
        self.service = service
        self._span = span
        self._child_turns = child_turns
        #: Who opened the connection (its handshake's key): every response on it is this tenant's.
        self.tenant = tenant
        #: Whether the handshake's key still names that tenant (a tenants file reloaded without it: no more
        #: messages are taken on the connection; None: keys never change).
        self._admitted = admitted
        #: The handshake carried ``openai-beta: responses_multi_agent=v1``: ``multi_agent`` is read.
        self.multi_agent = multi_agent
        self.config = config
        self.identity = identity  # the session its handshake's headers name, for every response on it
        self._receive = receive
        self._send = send
        self._send_lock = asyncio.Lock()
        self._lanes: dict[str | None, asyncio.Queue[JsonBody]] = {}
        self._queued_bytes = 0  # what the messages waiting on the lanes hold (JsonBody.held_bytes)
        self._workers: list[asyncio.Task[None]] = []
        # lane -> (response id, its conversation and session); the last response of each lane.
        self._local: dict[str | None, tuple[str, Chain]] = {}
        self._steering = Steering()
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
        limit_header = (MAX_MESSAGE_HEADER, str(self.service.max_input_bytes).encode())
        await self._send({"type": "websocket.accept", "headers": [limit_header]})
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
            if self._admitted is not None and not self._admitted():
                await self._revoked()
                return
            await self._on_message(raw)

    async def _revoked(self) -> None:
        """The key that opened the connection was removed (SIGHUP): say so, then close (policy violation);
        the responses already running on it end as they would had the client left."""
        with contextlib.suppress(Exception):
            await self._send_error(AuthenticationError("The API key of this connection is no longer valid."))
            await self._send({"type": "websocket.close", "code": 1008})

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
        try:  # parsed once, here (off the event loop when large), and kept parsed while it waits
            message = await self.service.decoder.decode(raw, self.tenant.scope)
        except APIError as exc:
            await self._send_error(exc)
            return
        del raw
        data = message.data
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
            cost = message.held_bytes
            if self._queued_bytes and self._queued_bytes + cost > budget:
                await self._send_error(
                    InvalidRequestError(
                        f"The responses waiting on this connection hold more than {budget} bytes; wait for "
                        "some to finish.",
                        code="too_many_requests",
                    ),
                    stream_id,
                )
                return
            self._queued_bytes += cost
            lane.put_nowait(message)
        elif kind == "response.steer":
            await self._on_steer(data)
        elif kind == "response.inject":
            await self._on_inject(data)
        else:
            await self._send_error(
                InvalidRequestError(
                    f"Unknown message type {kind!r}; send response.create, response.steer or response.inject.",
                    param="type",
                    code="unknown_event_type",
                )
            )

    # -- responses --------------------------------------------------------------------------

    async def _lane_worker(self, stream_id: str | None, lane: asyncio.Queue[JsonBody]) -> None:
        while True:
            message = await lane.get()
            self._queued_bytes -= message.held_bytes
            request: _Next | None = (message, ())
            del message
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

    async def _run_lane_request(self, request: _Next | None, stream_id: str | None) -> None:
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
                with turn_span(self._span, self._child_turns, self.tenant):
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
                self._queued_bytes -= lane.get_nowait().held_bytes
                await self._send_error(_restarting(), stream_id)
        self._workers.append(asyncio.ensure_future(self._close_when_idle()))

    async def _close_when_idle(self) -> None:
        await self._idle.wait()
        logger.debug("WebSocket connection drained; closing with %d", SERVICE_RESTART)
        with contextlib.suppress(Exception):
            await self._send(
                {"type": "websocket.close", "code": SERVICE_RESTART, "reason": "server restarting"}
            )

    def _lookup(self, response_id: str) -> Chain | None:
        for local_id, chain in self._local.values():
            if local_id == response_id:
                return chain
        return None

    def _remember(self, stream_id: str | None, response_id: str, chain: Chain) -> None:
        """Keep a lane's last response for ``previous_response_id``, within :data:`MAX_REMEMBERED_INPUTS`."""
        self._local.pop(stream_id, None)  # most recently answered last
        self._local[stream_id] = (response_id, chain)
        budget = MAX_REMEMBERED_INPUTS * self.service.max_input_bytes
        held = sum(kept.history.nbytes for _, kept in self._local.values())
        for lane, (_, kept) in list(self._local.items()):
            if held <= budget or lane == stream_id:
                break
            del self._local[lane]
            held -= kept.history.nbytes

    def _evict(self, response_id: str | None) -> None:
        if response_id is None:
            return
        for lane, (local_id, _) in list(self._local.items()):
            if local_id == response_id:
                del self._local[lane]

    async def _create(
        self, message: JsonBody | dict[str, Any], stream_id: str | None, steers: Sequence[Steer] = ()
    ) -> _Next | None:
        """Prepare and drive one response; the successor steering asks for, if any.

        ``steers`` are the submissions this response commits (a successor's).
        """
        received = time.perf_counter()
        data = message.data if isinstance(message, JsonBody) else message
        body = {k: v for k, v in data.items() if k not in ("type", "stream_id")}
        previous = body.get("previous_response_id")
        try:
            for name, (refused, why) in _NOT_IN_CREATE.items():
                if body.get(name) is refused:
                    raise InvalidRequestError(why, param=name)
            body.pop("stream", None)
            generate = body.pop("generate", None)
            if generate is not None and not isinstance(generate, bool):
                raise InvalidRequestError("'generate' must be a boolean.", param="generate")
            queued = self._steering.held_for(previous)
            if queued:  # steering held while this response waited for tool output: prepend it
                steers = [*steers, *queued]
                body["input"] = [item for s in queued for item in s.items] + as_items(body.get("input", []))
            # A message as received was checked when it arrived (request/body.py): not measured nor walked
            # again. Steering's successors and prepended items are measured and checked here (body_of).
            origin = Origin(
                received_at=received,
                lookup=self._lookup,
                generate=generate is not False,
                identity=self.identity,
                multi_agent_beta=self.multi_agent,
                tenant=self.tenant,
            )
            if isinstance(message, JsonBody) and not queued:
                checked = JsonBody(body, message.size, message.values, message.items)
            else:
                checked = await self.service.body_of(body, origin)
            prepared = await self.service.prepare(checked, origin)
            admission = await self.service.admit(prepared, self.tenant)
            await admission.turn()  # a full engine: the turn waits here, nothing sent for it yet
        except APIError as exc:
            self._evict(previous if isinstance(previous, str) else None)
            await self._send_error(exc, stream_id)
            for steer in steers:
                await self._steer_failed(steer, "successor_creation_failed", exc.message, stream_id)
            return None
        running = self._steering.begin(self.service.run(prepared, admission), body, stream_id)

        suffix = b',"stream_id":' + orjson.dumps(stream_id) + b"}" if stream_id is not None else None

        async def deliver(events: list[ResponseStreamEvent]) -> None:
            if written_apart(events):  # megabytes of logprobs: one event per turn of the loop
                for event in events:
                    await self._send_text(_payloads([event], suffix))
                    await asyncio.sleep(0)
                return
            await self._send_text(_payloads(events, suffix))

        try:
            final_json = await running.run.drive(deliver)
        finally:
            self._steering.end(running)
        stream = running.run.stream
        response = stream.final_response if stream is not None else None
        if response is not None and held_tokens(response) > APART_TOKENS:
            final = to_dict(response, logprobs=False)  # what _after reads, without parsing 17 MiB back
        else:
            final = orjson.loads(final_json)
        return await self._after(final, running)

    async def _after(self, final: dict[str, Any], running: Steered) -> _Next | None:
        """Remember the conversation, and send what the end means for queued steering (steering.py)."""
        stream_id = running.stream_id
        if final["status"] == "failed":
            previous = running.body.get("previous_response_id")
            self._evict(previous if isinstance(previous, str) else None)
        else:
            # The output as the model read it (server-run tools' items with their read fields), as stored.
            stream = running.run.stream
            output = (
                [to_dict(item, logprobs=False) for item in stream.model_output]
                if stream is not None
                else final["output"]
            )
            prepared = running.run.prepared
            self._remember(
                stream_id,
                final["id"],
                Chain(self.service.history_after(prepared, output), prepared.session_key),
            )
        outcome = self._steering.after(final, running)
        if isinstance(outcome, Successor):
            return outcome.body, outcome.steers
        if isinstance(outcome, Held):
            for steer in outcome.steers:
                event = self._connection_event(
                    "response.steer.pending",
                    reason="waiting_for_required_input",
                    required_input=list(outcome.required_input),
                    steer={"id": steer.id, "previous_response_id": steer.previous_response_id},
                )
                await self._send_event(event, stream_id)
            return None
        for refused in outcome:
            await self._steer_refused(refused)
        return None

    # -- injecting (the beta multi-agent surface) --------------------------------------------

    async def _on_inject(self, data: dict[str, Any]) -> None:
        """``response.inject``: client tool outputs for the sub-agents of a response running here waiting on
        them, committed all or none (``response.inject.created``); a response not running here is
        ``response.inject.failed`` with the input back; input that cannot be committed, an error event."""
        target = data.get("response_id")
        if not isinstance(target, str):
            await self._send_error(
                InvalidRequestError("'response_id' must be a string.", param="response_id")
            )
            return
        raw = data.get("input")
        running = self._steering.find(target)
        if running is None:
            finished = self._steering.finished(target)
            event = self._connection_event(
                "response.inject.failed",
                response_id=target,
                input=raw if isinstance(raw, list) else [],
                error={
                    "code": "response_already_completed" if finished else "response_not_found",
                    "message": f"Response {target!r} "
                    + ("has already ended." if finished else "is not running on this connection."),
                },
            )
            await self._send_event(event)
            return
        try:
            running.run.inject(raw)
        except APIError as exc:
            await self._send_error(exc, running.stream_id)
            return
        event = self._connection_event("response.inject.created", response_id=target)
        await self._send_event(event, running.stream_id)

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
        outcome = self._steering.submit(target, steer_input)
        if isinstance(outcome, SteerRefused):
            await self._steer_refused(outcome)
            return
        steer, stream_id = outcome
        event = self._connection_event(
            "response.steer.accepted", steer={"id": steer.id, "previous_response_id": target}
        )
        await self._send_event(event, stream_id)

    async def _steer_failed(self, steer: Steer, code: str, message: str, stream_id: str | None) -> None:
        await self._steer_refused(SteerRefused(steer, code, message, stream_id))

    async def _steer_refused(self, refused: SteerRefused) -> None:
        steer = refused.steer
        described: dict[str, Any] = {"previous_response_id": steer.previous_response_id, "input": steer.input}
        if refused.allocated and steer.id:
            described["id"] = steer.id
        event = self._connection_event(
            "response.steer.failed",
            error={"type": "invalid_request_error", "code": refused.code, "message": refused.message},
            steer=described,
        )
        await self._send_event(event, refused.stream_id)


def _restarting() -> ServiceUnavailableError:
    return ServiceUnavailableError(
        "The server is restarting; reconnect and send this request again.", code="server_restarting"
    )


async def serve_websocket(
    service: ResponsesService,
    config: ServerConfig,
    scope: Scope,
    receive: Receive,
    send: Send,
    tenants: TenantDirectory | None = None,
) -> None:
    """Serve one WebSocket connection on ``/v1/responses``.

    The session the handshake's headers name (``request/affinity.py``) is every response's on it, without
    an end-of-session flag (which would end it at the first response); a header that is not a key refuses
    the connection before it is accepted: a 400 ``invalid_session_id`` as over HTTP where the server can
    answer a handshake with a response (ASGI's ``websocket.http.response``: uvicorn), else closed (HTTP
    403). With ``tenants``, each message is taken only while the handshake's key still names the
    connection's tenant (docs/tenants.md#the-tenants-file).
    """
    try:
        identity = dataclasses.replace(session_identity(scope.get("headers") or ()), final=False)
    except APIError as exc:
        await _refuse(scope, send, exc)
        return
    beta = multi_agent_beta(scope.get("headers") or ())
    tenant = tenant_of(scope)
    admitted = None if tenants is None or tenants.open else functools.partial(_admits, tenants, scope, tenant)
    with socket_span(scope, tenant) as live:
        await ResponsesSocket(
            service,
            config,
            receive,
            send,
            identity,
            multi_agent=beta,
            tenant=tenant,
            admitted=admitted,
            span=live,
            child_turns=continues_client(scope),
        ).run()


async def _refuse(scope: Scope, send: Send, error: APIError) -> None:
    """Refuse a handshake: ``error``'s status and JSON body where the server can send a response instead of
    accepting (ASGI's WebSocket denial response), else a close before accepting (a 403)."""
    if "websocket.http.response" not in (scope.get("extensions") or {}):
        await send({"type": "websocket.close", "code": 1008})
        return
    body = orjson.dumps(error.to_dict())
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "websocket.http.response.start", "status": error.status_code, "headers": headers})
    await send({"type": "websocket.http.response.body", "body": body})


def _admits(tenants: TenantDirectory, scope: Scope, tenant: Tenant) -> bool:
    """Whether the request's key names ``tenant`` still (one hash of the key: a message's cost, not a token's)."""
    now = tenants.identify(scope["headers"])
    return now is not None and now.name == tenant.name


def _payloads(events: Sequence[ResponseStreamEvent], suffix: bytes | None) -> list[bytes]:
    """The events' JSON, each ending with the lane's ``stream_id`` (``suffix``) when it has one."""
    payloads = [event_json(e) for e in events]
    return payloads if suffix is None else [p[:-1] + suffix for p in payloads]
