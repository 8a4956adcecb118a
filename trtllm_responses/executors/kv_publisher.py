"""KV cache events out: TensorRT-LLM's events, published in the ZMQ wire format NVIDIA Dynamo's KV router reads.

The one edge to that foreign format (docs/sessions-and-kv-cache.md#kv-events-and-metrics). Dynamo's "KV Events
for Custom Engines" (ai-dynamo/dynamo ``docs/integrations/kv_events_custom_engines.md``, "ZMQ Wire Format",
vLLM-compatible) defines it: a PUB socket sends each batch as three frames, the topic, an 8-byte big-endian
sequence number, and a msgpack payload ``[timestamp, [events], dp_rank]``, each event a map whose ``type`` is
``BlockStored`` (``block_hashes``, ``parent_block_hash``, ``token_ids``, ``block_size``, ``lora_id``),
``BlockRemoved`` (``block_hashes``) or ``AllBlocksCleared``; hashes as signed 64-bit integers. Dynamo's
``KvEventPublisher`` with a ``ZmqKvEventPublisherConfig(zmq_endpoint=..., zmq_topic=...)`` subscribes to such a
socket and feeds its router.

TensorRT-LLM's events (``KVCacheEventSerializer``, ``tensorrt_llm/_utils.py``) become those as Dynamo's own
TensorRT-LLM worker maps them (``components/src/dynamo/trtllm/publisher.py``): a ``stored`` event's whole blocks
(a block of fewer than ``block_size`` tokens ends the list and its later removal is dropped), its
``parent_hash``; a ``removed`` event's hashes; ``created`` events only tell the largest attention window, and
events of other windows (gpt-oss's sliding-window pool) are dropped, since the full-attention pool is the one
prefix reuse follows; ``attention_dp_rank`` is the batch's ``dp_rank``. A gap in a rank's event ids (the
engine's bounded buffer dropped some) is sent as ``AllBlocksCleared`` for that rank, as TensorRT-LLM's own
fan-out does (``tensorrt_llm/serve/kv_event_fanout.py``), so a router forgets what it can no longer trust.

The replica's identity is the topic frame (``--kv_events_replica_id``; default the server's host:port):
a router that subscribes to many replicas tells their events apart by it, and a Dynamo relay subscribes with
``zmq_topic`` set to it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["KvEventPublisher", "KvEventsSettings", "KvEventTranslator"]

logger = logging.getLogger(__name__)

_U64 = 1 << 64


@dataclass(frozen=True, slots=True)
class KvEventsSettings:
    """Where KV cache events go (``serve --kv_events_endpoint``) and whose they say they are."""

    #: A ZMQ endpoint the publisher binds (``tcp://*:5557``, ``ipc:///run/kv.sock``).
    endpoint: str
    #: This replica's id: the topic of every message.
    replica_id: str


def _signed(value: int) -> int:
    """A hash as the signed 64-bit integer the wire carries (two's complement of its low 64 bits)."""
    value %= _U64
    return value - _U64 if value >= 1 << 63 else value


class KvEventTranslator:
    """TensorRT-LLM's serialized events in, Dynamo's wire events out, by attention-DP rank (state: the
    largest window, the last event id of each rank, the partial blocks whose removal is dropped)."""

    def __init__(self, block_size: int) -> None:
        self.block_size = block_size
        self._window: int | None = None
        self._initial = True  # the engine's first events are its ``created`` ones
        self._last_ids: dict[int, int] = {}
        self._partial: set[int] = set()

    def translate(self, events: Iterable[Mapping[str, Any]]) -> dict[int, list[dict[str, Any]]]:
        """The wire events of ``events``, grouped by rank, in order."""
        batches: dict[int, list[dict[str, Any]]] = {}
        for event in events:
            rank = int(event.get("attention_dp_rank") or 0)
            if self._gap(rank, event.get("event_id")):
                batches.setdefault(rank, []).append({"type": "AllBlocksCleared"})
            wire = self._one(event)
            if wire is not None:
                batches.setdefault(rank, []).append(wire)
        return batches

    def _gap(self, rank: int, event_id: Any) -> bool:
        if not isinstance(event_id, int):
            return False
        last = self._last_ids.get(rank)
        self._last_ids[rank] = event_id
        return (last is None and event_id != 0) or (last is not None and event_id != last + 1)

    def _one(self, event: Mapping[str, Any]) -> dict[str, Any] | None:
        data = event.get("data") or {}
        kind = data.get("type")
        window = event.get("window_size")
        if kind == "created":
            if self._initial and isinstance(window, int):
                self._window = max(self._window or 0, window)
            return None
        self._initial = False
        if window is not None and self._window is not None and window != self._window:
            return None
        if kind == "stored":
            return self._stored(data)
        if kind == "removed":
            return self._removed(data)
        return None  # ``updated`` (a block moved between tiers or priorities): nothing a router tracks

    def _stored(self, data: Mapping[str, Any]) -> dict[str, Any] | None:
        hashes: list[int] = []
        tokens: list[int] = []
        for block in data.get("blocks") or ():
            block_tokens = block.get("tokens") or ()
            if block.get("block_hash") is None:
                continue
            if len(block_tokens) < self.block_size:
                self._partial.add(_signed(block["block_hash"]))
                break
            hashes.append(_signed(block["block_hash"]))
            tokens.extend(int(t["token_id"]) for t in block_tokens)
        if not hashes:
            return None
        parent = data.get("parent_hash")
        return {
            "type": "BlockStored",
            "block_hashes": hashes,
            "parent_block_hash": None if parent is None else _signed(parent),
            "token_ids": tokens,
            "block_size": self.block_size,
            "lora_id": None,
        }

    def _removed(self, data: Mapping[str, Any]) -> dict[str, Any] | None:
        hashes = []
        for value in data.get("block_hashes") or ():
            signed = _signed(value)
            if signed in self._partial:
                self._partial.discard(signed)
            else:
                hashes.append(signed)
        return {"type": "BlockRemoved", "block_hashes": hashes} if hashes else None


class KvEventPublisher:
    """A ZMQ PUB socket bound at ``settings.endpoint`` sending Dynamo's wire batches under the replica's topic.

    Sends never block: a PUB socket drops what a slow or absent subscriber cannot take (its high-water mark),
    as the engine's own bounded buffer does; a router resynchronises on ``AllBlocksCleared``.
    """

    def __init__(self, settings: KvEventsSettings, block_size: int) -> None:
        import msgpack
        import zmq

        self._pack = msgpack.packb
        self._zmq = zmq
        self._context = zmq.Context()
        self._socket = self._context.socket(zmq.PUB)
        self._socket.setsockopt(zmq.LINGER, 0)
        self._socket.bind(settings.endpoint)
        #: The endpoint as bound (a ``tcp://*:0`` endpoint says its port here).
        self.endpoint = str(self._socket.getsockopt_string(zmq.LAST_ENDPOINT))
        self._topic = settings.replica_id.encode("utf-8")
        self._sequence = 0
        self.translator = KvEventTranslator(block_size)
        logger.info(
            "KV cache events: publishing to %s (topic %r, Dynamo's ZMQ wire format)",
            self.endpoint,
            settings.replica_id,
        )

    def publish(self, events: Iterable[Mapping[str, Any]]) -> int:
        """Send TensorRT-LLM's ``events`` as one batch per attention-DP rank; how many batches were sent."""
        batches = self.translator.translate(events)
        for rank, wire in batches.items():
            payload = self._pack([time.time(), wire, rank], use_bin_type=True)
            frames = [self._topic, self._sequence.to_bytes(8, "big"), payload]
            self._sequence += 1
            try:
                self._socket.send_multipart(frames, flags=self._zmq.NOBLOCK)
            except self._zmq.Again:
                logger.debug("KV events batch dropped (no subscriber could take it)")
        return len(batches)

    def close(self) -> None:
        """Close the socket and its context."""
        self._socket.close(0)
        self._context.term()
