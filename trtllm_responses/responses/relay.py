"""Background responses across processes, through Redis (``--store redis://…``).

A background response runs in the process that received its create; :class:`RedisRelay` mirrors its
events to a Redis stream and its snapshot to a key, so every other process can poll it, resume its
stream and cancel it (a cancel is published; the running process aborts). Generation never waits
for Redis, and a process following another's response ends its stream with ``response.failed`` if
Redis fails under it: a stream never ends without a terminal event. Keys and behaviour:
docs/stores-and-frontends.md#stores (replicas, "When Redis fails"). A run is known here by its key, its
tenant's scope and its id (``ResponseRun.key``), as the store knows its response (``store/scoped.py``):
the methods of any process take that key, so one tenant never follows or cancels another's.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import orjson

from ..core import ServiceUnavailableError, to_json
from ..store import RedisStore
from .background import BackgroundRun, Framing
from .prepared import PreparedResponse

__all__ = ["RedisRelay", "running"]

logger = logging.getLogger(__name__)

EVENTS = "trtllm:ev:"
SNAPSHOT = "trtllm:bg:"
CANCEL = "trtllm:cancel"
_FLUSH_INTERVAL = 0.02
#: Retrying a failed copy to Redis: the first wait, and the longest (doubling in between).
_RETRY_FIRST = 0.05
_RETRY_MAX = 1.0
#: Frames sent to Redis in one pipeline (a run's whole record is sent again after Redis came back empty).
_COPY_BATCH = 512


class RedisRelay:
    """Publishes this process's background responses to Redis, and reads other processes' from it."""

    def __init__(self, store: RedisStore, framing: Framing, max_events: int, grace: float) -> None:
        self.store = store
        self.framing = framing
        self.client = store.client
        self.max_events = max_events
        self.grace = max(1, int(grace))
        self._subscriber: asyncio.Task[None] | None = None

    # -- the owning process --------------------------------------------------------------------

    async def announce(self, prepared: PreparedResponse) -> None:
        """Make a starting background response visible to every process (its ``queued`` snapshot)."""
        snapshot = to_json(prepared.response.model_copy(update={"status": "queued"}))
        key = prepared.owner.scope + prepared.generation.request_id  # as ResponseRun.key
        await self._call("set", SNAPSHOT + key, snapshot, ex=self.grace + 3600)

    async def publish(self, run: BackgroundRun) -> None:
        """Run until ``run`` ends and is copied: mirror its frames and snapshot to Redis.

        A Redis error never ends the copy: it is retried (backoff up to :data:`_RETRY_MAX` s) while the
        run goes on and for its grace period after it ended, resuming after the last frame Redis holds
        (all of them again if Redis came back empty), so once Redis is back every process serves the
        run's state and, when its store write failed, its final (failed) response instead of a 404.
        """
        key = EVENTS + run.key
        written: int | None = 0  # the next frame to copy; None: unknown after an error, asked of Redis
        delay = _RETRY_FIRST
        failing = False
        while True:
            try:
                if written is None:
                    written = await self._copied_up_to(key)
                    resync = True  # Redis may have come back empty: the snapshot is written again
                else:
                    resync = False
                written = await self._copy(run, key, written, resync)
                if failing:
                    logger.warning("Background response %s is copied to Redis again", run.id)
                    failing = False
                    delay = _RETRY_FIRST
                if run.done and written >= run.next_sequence:
                    await self._copy_end(run, key)
                    return
                await run.changed()
                await asyncio.sleep(_FLUSH_INTERVAL)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if run.done and run.ended_at is not None and time.monotonic() - run.ended_at > self.grace:
                    logger.error("Gave up copying background response %s to Redis: %r", run.id, exc)
                    return
                if not failing:
                    logger.warning(
                        "Could not copy background response %s to Redis (%r); retrying", run.id, exc
                    )
                    failing = True
                written = None
                await asyncio.sleep(delay)
                delay = min(delay * 2, _RETRY_MAX)

    async def _copied_up_to(self, key: str) -> int:
        """The sequence number after the last frame Redis holds of a stream (0 if it holds none)."""
        last = await self.client.xrevrange(key, "+", "-", count=1)
        return int(last[0][1][b"seq"]) + 1 if last else 0

    async def _copy(self, run: BackgroundRun, key: str, written: int, resync: bool) -> int:
        """Copy the frames from ``written`` on (and the snapshot while it runs); the next frame to copy."""
        written = max(written, run.first_sequence)  # frames dropped by the local budget are gone
        end = run.next_sequence
        while written < end or resync:
            upto = min(end, written + _COPY_BATCH)
            pipe = self.client.pipeline(transaction=False)
            for seq in range(written, upto):
                pipe.xadd(
                    key,
                    {"seq": seq, "frame": run.frames[seq - run.first_sequence]},
                    maxlen=self.max_events,
                    approximate=True,
                )
            if not run.done:
                pipe.set(SNAPSHOT + run.key, run.snapshot(), ex=self.grace + 3600)
            await pipe.execute()
            written = upto
            resync = False
        return written

    async def _copy_end(self, run: BackgroundRun, key: str) -> None:
        """The run ended and its frames are copied: they expire after its grace; its snapshot goes."""
        await self.client.expire(key, self.grace)
        if run.run.store_failed and run.final is not None:
            # Not in the store: every process answers with the failed response for a while.
            await self.client.set(SNAPSHOT + run.key, run.final, ex=self.grace)
        else:
            await self.client.delete(SNAPSHOT + run.key)  # the final response is in the store now

    async def publish_final(self, key: str, final: bytes) -> bool:
        """Make the failed response of a run whose store write failed (not a background one: those go with
        their events) what every process answers for ``key`` for the grace period, under its snapshot's key;
        retried (backoff up to :data:`_RETRY_MAX` s) until written (True) or the grace is over (False)."""
        ended = time.monotonic()
        delay = _RETRY_FIRST
        while True:
            left = self.grace - (time.monotonic() - ended)
            try:
                await self.client.set(SNAPSHOT + key, final, ex=max(1, int(left)))
                return True
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if left <= delay:
                    logger.error("Gave up copying the failed response %s to Redis: %r", key, exc)
                    return False
                await asyncio.sleep(delay)
                delay = min(delay * 2, _RETRY_MAX)

    async def listen_for_cancels(self, cancel: Callable[[str], Awaitable[None]]) -> None:
        """Run until cancelled: cancel local runs that any process asked to cancel."""
        while True:
            pubsub = self.client.pubsub()
            try:
                await pubsub.subscribe(CANCEL)
                while True:
                    message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=1.0)
                    if message is not None and message.get("type") == "message":
                        await cancel(message["data"].decode())
            except asyncio.CancelledError:
                await pubsub.aclose()
                raise
            except Exception as exc:
                logger.warning("Redis cancel subscription lost (%r); retrying", exc)
                await asyncio.sleep(1)

    # -- any process ---------------------------------------------------------------------------

    async def forget(self, response_id: str) -> None:
        """Drop what Redis keeps of a background response besides the stored response (DELETE)."""
        await self._call("delete", EVENTS + response_id, SNAPSHOT + response_id)

    async def _call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        return await self.store._call(name, *args, **kwargs)

    async def snapshot(self, response_id: str) -> bytes | None:
        """The in-progress snapshot of a background response running anywhere, or None."""
        data = await self._call("get", SNAPSHOT + response_id)
        return bytes(data) if data is not None else None

    async def request_cancel(self, response_id: str, timeout: float = 30) -> bytes | None:
        """Ask the owning process to cancel; the stored response once it ended (None if nobody runs it).
        ``response_id`` is the run's key, which is also its response's key in the store."""
        if not running(await self.snapshot(response_id)):
            return None  # nobody runs it (its snapshot may be the failed response of a write that failed)
        await self._call("publish", CANCEL, response_id)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            entry = await self.store.get(response_id)
            if entry is not None:
                return entry.response_json
            await asyncio.sleep(0.05)
        raise ServiceUnavailableError("The process running this response did not answer the cancel in time.")

    async def has_events(self, response_id: str) -> bool:
        """Whether Redis still keeps this response's events."""
        return bool(await self._call("exists", EVENTS + response_id))

    async def first_sequence(self, response_id: str) -> int:
        """The oldest sequence number Redis still keeps (0 when it has every event)."""
        first = await self._call("xrange", EVENTS + response_id, "-", "+", count=1)
        return int(first[0][1][b"seq"]) if first else 0

    async def follow(self, response_id: str, starting_after: int | None) -> AsyncIterator[bytes]:
        """Frames after ``starting_after``: what Redis holds, then new ones until the terminal event."""
        key = EVENTS + response_id
        last_id = "0-0"
        after = -1 if starting_after is None else starting_after
        sent = after  # the last sequence number this follower was given
        snapshot: bytes | None = None
        while True:
            try:
                if snapshot is None:  # what a failed terminal event is built from, should Redis fail
                    snapshot = await self.client.get(SNAPSHOT + response_id)
                batches = await self.client.xread({key: last_id}, block=1000, count=512)
                if not batches:
                    # Nothing new for a second: the stream may not have started yet (its snapshot says it
                    # is coming) or may be gone (expired after its grace period).
                    if not await self.client.exists(key) and not await self.client.exists(
                        SNAPSHOT + response_id
                    ):
                        return
                    continue
            except Exception as exc:
                logger.error("Lost the Redis event stream of %s: %r", response_id, exc)
                own_id = response_id.rpartition("/")[2]  # the key less its tenant's scope
                yield self.framing.failed(_lost_response(own_id, snapshot), sent + 1)
                return
            out = []
            terminal = False
            for entry_id, fields in batches[0][1]:
                last_id = entry_id
                seq = int(fields[b"seq"])
                if seq > after:
                    frame = fields[b"frame"]
                    out.append(frame)
                    sent = seq
                    terminal = terminal or self.framing.is_terminal(frame)
            if out:
                yield b"".join(out)
            if terminal:
                return


def running(snapshot: bytes | None) -> bool:
    """Whether a snapshot (``RedisRelay.snapshot``) is of a response still running, not the failed final
    response of a run whose store write failed."""
    return snapshot is not None and orjson.loads(snapshot).get("status") in ("queued", "in_progress")


def _lost_response(response_id: str, snapshot: bytes | None) -> dict[str, Any]:
    """The failed response a follower whose Redis stream failed ends with (from the last snapshot read)."""
    response: dict[str, Any] = {"id": response_id, "object": "response", "output": []}
    if snapshot:
        try:
            response = orjson.loads(snapshot)
        except orjson.JSONDecodeError:
            pass
    response["status"] = "failed"
    response["error"] = {
        "code": "server_error",
        "message": "The response store (Redis) failed while this stream was followed from it; the response "
        "goes on in the process running it: retrieve it once the store is back.",
    }
    return response
