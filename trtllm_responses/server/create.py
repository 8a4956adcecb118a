"""``POST /v1/responses``: one Responses request, prepared, then answered as JSON or an SSE stream.

Creating a response is the per-token hot path: every engine step is one write to the socket.
Served by the app's own route table (``router.py``), not the framework, each write goes straight
to the server's ``send``: no wrapper coroutines (error middleware and exception handlers) on the
way. Errors use the same envelope as every route (``errors.error_response``).
"""

from __future__ import annotations

import time

from starlette.responses import Response

from ..core import to_json
from ..request import multi_agent_beta, session_identity
from ..responses import Origin, ResponsesService
from .body import model_input
from .call import Call
from .responses import EventStreamResponse, FramesResponse, JSONBytesResponse

__all__ = ["PATH", "create_response"]

PATH = "/v1/responses"


async def create_response(service: ResponsesService, call: Call) -> Response:
    """Serve one ``POST /v1/responses``: a JSON response, or an SSE stream (a background one: queued)."""
    headers = call.headers
    identity = session_identity(headers)
    body = await call.body(model_input(service))
    origin = Origin(
        received_at=time.perf_counter(),
        identity=identity,
        multi_agent_beta=multi_agent_beta(headers),
        tenant=call.tenant,
    )
    prepared = await service.prepare(await service.decode(body, call.tenant.scope), origin)
    call.record.response_id = prepared.response.id
    call.record.session_id = prepared.session_key
    run = service.run(prepared, await call.admit(service, prepared))
    call.runs = (run,)
    call.streamed = bool(prepared.request.stream)
    if prepared.request.background:
        events = await service.start_background(run)
        if prepared.request.stream:
            return FramesResponse(events.follow(None))
        return JSONBytesResponse(to_json(prepared.response.model_copy(update={"status": "queued"})))
    if prepared.request.stream:
        return EventStreamResponse(run)
    return JSONBytesResponse(await call.unless_client_leaves(run.drive()))
