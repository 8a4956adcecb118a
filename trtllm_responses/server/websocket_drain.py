"""Draining WebSocket connections: in-flight responses end, then the socket closes with 1012.

uvicorn's own shutdown closes every WebSocket at once with 1012 (Service Restart) and tells the
app the client left, which would abort the responses still streaming on it. The protocol here
(uvicorn's websockets-sansio protocol, subclassed) instead hands the app a private ASGI message,
:data:`DRAIN`, on ``/v1/responses`` connections; the app (``websocket.py``) lets the responses
already running finish, answers anything else with an error event, and closes with
:data:`SERVICE_RESTART` once none runs. A socket still open ``timeout`` seconds later (the server's
``--shutdown_timeout``) gets uvicorn's hard close, 1012 too. 1012 is a code the ``openai`` SDK
reconnects on by itself (``openai.types.websocket_reconnection.is_recoverable_close``: 1001, 1005,
1006, 1011, 1012, 1013, 1015), so a client behind a load balancer continues on another replica.
"""

from __future__ import annotations

from typing import Any

from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol

from .websocket_deflate import DeflatingWebSocketProtocol
from .websocket_pacing import LoopBudget, PacedWebSocketProtocol

__all__ = ["DRAIN", "SERVICE_RESTART", "draining_websocket_protocol"]

#: The ASGI message type the app receives when the server starts draining (private to this server).
DRAIN = "trtllm.websocket.drain"
#: The close code of a drained connection (RFC 6455 registry: Service Restart).
SERVICE_RESTART = 1012
_PATH = "/v1/responses"


def draining_websocket_protocol(timeout: float) -> type[WebSocketsSansIOProtocol]:
    """uvicorn's WebSocket protocol whose shutdown lets the app drain for up to ``timeout`` seconds (and
    which decodes messages within a budget per loop turn its connections share: ``websocket_pacing.py``,
    and compresses a large message in a thread: ``websocket_deflate.py``)."""

    class DrainingWebSocketProtocol(PacedWebSocketProtocol, DeflatingWebSocketProtocol):
        budget = LoopBudget()
        _draining = False

        def shutdown(self) -> None:
            scope: Any = getattr(self, "scope", None)
            drains = (
                self.handshake_complete
                and not self.close_sent
                and not self._draining
                and scope is not None
                and scope.get("path") == _PATH
            )
            if not drains:
                super().shutdown()
                return
            self._draining = True
            message: Any = {"type": DRAIN}
            self.queue.put_nowait(message)
            self.loop.call_later(timeout, self._hard_close)

        def _hard_close(self) -> None:
            if not self.transport.is_closing():
                super().shutdown()

    return DrainingWebSocketProtocol
