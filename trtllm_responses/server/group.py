"""One view of a group of frontends (``serve --num_serve_frontends K``; docs/stores-and-frontends.md#many-frontends-num_serve_frontends).

Each frontend of a group serves on the shared port and on a Unix socket of its own in the group's folder.
What a client must see whole is gathered there: ``GET /stats`` on any frontend asks every other for its
own (``?scope=frontend``, with its raw latency windows) and merges them; Prometheus counters need no
asking (``ops/metrics.py``: the group's multiprocess files). A background response runs in the frontend
that received its create: on a store with no relay (SQLite), a request for it that another frontend
does not hold (a 404, or a 400 saying its events are not kept here: ``APIError.not_held_here``) is handed
to the others (:func:`forward`), and the one that holds it answers, streams included. The sockets live in a folder only the
server's user can open (``tempfile.mkdtemp``, mode 0700).
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import Any

import orjson

__all__ = [
    "FORWARDED",
    "NOT_HELD",
    "PeerAnswer",
    "forward",
    "frontend_socket_path",
    "gather_stats",
    "group_metrics_dir",
]

logger = logging.getLogger(__name__)

#: Seconds one frontend's ``/stats`` may take before the merged view leaves it out (and says so).
PEER_TIMEOUT = 2.0
#: Bytes of one frontend's ``/stats`` answer read at most (its windows: 2 x 4,096 samples).
PEER_MAX_BYTES = 4 << 20


def group_metrics_dir(group_dir: str) -> str:
    """The group's Prometheus multiprocess folder."""
    return os.path.join(group_dir, "metrics")


def frontend_socket_path(group_dir: str, index: int) -> str:
    """Where frontend ``index`` of the group listens beside the shared port."""
    return os.path.join(group_dir, f"frontend-{index}.sock")


async def _json(path: str, target: str, headers: dict[str, str]) -> dict[str, Any]:
    """``GET target`` on frontend socket ``path``: its JSON answer (OSError unless a 200, of at most
    PEER_MAX_BYTES)."""
    answer = await _request(path, "GET", target, headers, b"")
    if answer is None or answer.status != 200:
        raise OSError(f"frontend answered {answer.status if answer else 404}")
    body = b""
    try:
        async for chunk in answer.body:
            body += chunk
            if len(body) > PEER_MAX_BYTES:
                raise OSError(f"frontend answered more than {PEER_MAX_BYTES} bytes")
    finally:
        await answer.body.aclose()  # closes the connection whether or not it was read to its end
    return orjson.loads(body)  # type: ignore[no-any-return]


async def gather_stats(
    group_dir: str, count: int, own: int, reset: bool, authorization: str | None
) -> tuple[list[dict[str, Any]], list[int]]:
    """Every other frontend's own ``/stats`` (reset too, when asked), and the frontends that did not answer."""
    target = "/stats?scope=frontend" + ("&reset=1" if reset else "")
    headers = {"Authorization": authorization} if authorization else {}
    others = [i for i in range(count) if i != own]
    answers = await asyncio.gather(
        *(
            asyncio.wait_for(_json(frontend_socket_path(group_dir, i), target, headers), PEER_TIMEOUT)
            for i in others
        ),
        return_exceptions=True,
    )
    found, missing = [], []
    for index, answer in zip(others, answers, strict=True):
        if isinstance(answer, BaseException):
            logger.warning("Frontend %d did not answer /stats: %s", index, answer)
            missing.append(index)
        else:
            found.append(answer)
    return found, missing


#: The header a frontend puts on a request it hands to another (never handed on again).
FORWARDED = "trtllm-group-forwarded"
#: The header of a frontend's answer to a handed-on request it does not hold either (an error
#: ``not_held_here``): the asking frontend asks the next one.
NOT_HELD = "trtllm-group-not-held"


@dataclass
class PeerAnswer:
    """Another frontend's answer to a forwarded request: its status, content type and body, streamed."""

    status: int
    content_type: str
    body: AsyncGenerator[bytes, None]


async def forward(
    group_dir: str,
    count: int,
    own: int,
    method: str,
    target: str,
    headers: dict[str, str],
    body: bytes = b"",
) -> PeerAnswer | None:
    """Ask the group's other frontends, one after the other, for what this one does not hold (a background
    response another runs, or whose events another keeps); the first answer of one that holds it (not a
    404, not marked :data:`NOT_HELD`), or None (nobody does)."""
    for index in range(count):
        if index == own:
            continue
        try:
            answer = await asyncio.wait_for(
                _request(frontend_socket_path(group_dir, index), method, target, headers, body), PEER_TIMEOUT
            )
        except (OSError, asyncio.TimeoutError, ValueError) as exc:
            logger.warning("Frontend %d did not answer %s %s: %s", index, method, target, exc)
            continue
        if answer is not None:
            return answer
    return None


async def _request(
    path: str, method: str, target: str, headers: dict[str, str], body: bytes
) -> PeerAnswer | None:
    reader, writer = await asyncio.open_unix_connection(path, limit=PEER_MAX_BYTES)
    head = f"{method} {target} HTTP/1.1\r\nHost: frontend\r\nConnection: close\r\n{FORWARDED}: 1\r\n"
    head += f"Content-Length: {len(body)}\r\n"
    head += "".join(f"{name}: {value}\r\n" for name, value in headers.items())
    writer.write((head + "\r\n").encode("latin-1") + body)
    await writer.drain()
    status_line = await reader.readline()
    status = int(status_line.split()[1])
    fields: dict[str, str] = {}
    while (line := await reader.readline()) not in (b"\r\n", b""):
        name, _, value = line.decode("latin-1").partition(":")
        fields[name.strip().lower()] = value.strip()
    if status == 404 or NOT_HELD in fields:
        writer.close()
        return None
    chunked = fields.get("transfer-encoding", "").lower() == "chunked"
    return PeerAnswer(status, fields.get("content-type", "application/json"), _body(reader, writer, chunked))


async def _body(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, chunked: bool
) -> AsyncGenerator[bytes, None]:
    try:
        if not chunked:
            while data := await reader.read(1 << 16):
                yield data
            return
        while True:
            size = int((await reader.readline()).split(b";")[0], 16)
            if size == 0:
                return
            yield await reader.readexactly(size)
            await reader.readexactly(2)  # the chunk's CRLF
    finally:
        writer.close()
