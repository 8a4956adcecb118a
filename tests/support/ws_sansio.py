"""A server's WebSocket protocol class (uvicorn's, or the one ``uvicorn_config`` builds) run in this process
over a fake transport, opened by ``websockets``' sans-I/O client offering permessage-deflate (as Codex and
the ``websockets`` client do): what the server writes, one entry per write, with nothing between."""

from __future__ import annotations

import asyncio
from typing import Any

import uvicorn
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol
from uvicorn.server import ServerState
from websockets.client import ClientProtocol
from websockets.extensions.permessage_deflate import ClientPerMessageDeflateFactory
from websockets.uri import parse_uri


class FakeTransport(asyncio.Transport):
    """Takes what the protocol writes (kept in ``writes`` unless ``keep`` is false); reading is not real."""

    def __init__(self, keep: bool = True) -> None:
        super().__init__()
        self.keep = keep
        self.writes: list[bytes] = []
        self.closing = False

    def write(self, data: Any) -> None:
        if self.keep:
            self.writes.append(bytes(data))

    def is_closing(self) -> bool:
        return self.closing

    def close(self) -> None:
        self.closing = True

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return default


def open_compressed(
    protocol_class: type[WebSocketsSansIOProtocol], app: Any, keep: bool = True
) -> tuple[WebSocketsSansIOProtocol, FakeTransport, ClientProtocol]:
    """A connection of ``protocol_class`` serving ``app`` (an ASGI app), its handshake sent by a client that
    offers permessage-deflate; call in a running loop. The app's task is in the protocol's ``tasks``; the
    client has not read the server's answer yet (``transport.writes``)."""
    config = uvicorn.Config(app, ws_per_message_deflate=True, log_level="warning", lifespan="off")
    config.load()
    protocol = protocol_class(config, ServerState(), {}, asyncio.get_running_loop())  # type: ignore[call-arg]
    transport = FakeTransport(keep)
    protocol.connection_made(transport)
    client = ClientProtocol(
        parse_uri("ws://127.0.0.1/v1/responses"),
        extensions=[ClientPerMessageDeflateFactory(client_max_window_bits=True)],
        max_size=None,
    )
    client.send_request(client.connect())
    protocol.data_received(b"".join(client.data_to_send()))
    return protocol, transport, client
