"""KV cache events out (docs/sessions-and-kv-cache.md#kv-events-and-metrics): ``serve --engine trtllm
--kv_events_endpoint`` on the fake TensorRT-LLM, read by a subscriber written from NVIDIA Dynamo's published
schema, not from the publisher's code.

The schema (ai-dynamo/dynamo ``docs/integrations/kv_events_custom_engines.md``, "ZMQ Wire Format", the format
vLLM's publisher writes and Dynamo's ``ZmqKvEventPublisherConfig`` relay reads):

| frame | |
| --- | --- |
| 1 | topic |
| 2 | sequence number (8 bytes, big-endian) |
| 3 | msgpack payload ``[timestamp, [events], dp_rank]`` |

each event a map with ``type`` ``BlockStored`` (``block_hashes``, ``parent_block_hash`` "required for all blocks
except the first block in a sequence", ``token_ids``, ``block_size``, ``lora_id``), ``BlockRemoved``
(``block_hashes``) or ``AllBlocksCleared``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from support.checkpoints import make_checkpoint
from support.trtllm_harness import Served, free_port

from trtllm_responses.executors.trtllm import attention_dp_rank
from trtllm_responses.harmony import load_encoding

zmq = pytest.importorskip("zmq")
msgpack = pytest.importorskip("msgpack")

BLOCK = 32  # the fake's (and TensorRT-LLM's) default tokens_per_block


@dataclass
class RouterIndex:
    """What a KV-aware router learns of one replica from the documented wire format: the blocks each
    attention-DP rank holds, by hash, with their tokens."""

    topic: bytes
    sequences: list[int] = field(default_factory=list)
    held: dict[int, dict[int, list[int]]] = field(default_factory=dict)  # dp_rank -> hash -> tokens
    removed: list[int] = field(default_factory=list)
    stored_events: list[dict[str, Any]] = field(default_factory=list)
    ranks: set[int] = field(default_factory=set)

    def apply(self, frames: list[bytes]) -> None:
        topic, sequence, payload = frames
        assert topic == self.topic
        assert len(sequence) == 8
        self.sequences.append(int.from_bytes(sequence, "big"))
        timestamp, events, dp_rank = msgpack.unpackb(payload, raw=False)
        assert isinstance(timestamp, float) and isinstance(dp_rank, int)
        self.ranks.add(dp_rank)
        blocks = self.held.setdefault(dp_rank, {})
        for event in events:
            kind = event["type"]
            if kind == "BlockStored":
                hashes, tokens, size = event["block_hashes"], event["token_ids"], event["block_size"]
                assert size == BLOCK and len(tokens) == size * len(hashes)
                parent = event["parent_block_hash"]
                assert parent is None or parent in blocks, "a parent the router was told of"
                assert all(-(1 << 63) <= h < 1 << 63 for h in hashes)  # signed 64-bit
                for i, block_hash in enumerate(hashes):
                    blocks[block_hash] = tokens[i * size : (i + 1) * size]
                self.stored_events.append(event)
            elif kind == "BlockRemoved":
                for block_hash in event["block_hashes"]:
                    assert blocks.pop(block_hash, None) is not None, "only blocks it was told were stored"
                    self.removed.append(block_hash)
            else:
                assert kind == "AllBlocksCleared"
                blocks.clear()


def _subscribe(endpoint: str, topic: bytes) -> Any:
    socket = zmq.Context.instance().socket(zmq.SUB)
    socket.setsockopt(zmq.SUBSCRIBE, topic)
    socket.setsockopt(zmq.LINGER, 0)
    socket.connect(endpoint)
    return socket


def _read(socket: Any, index: RouterIndex, until: Any, seconds: float = 15) -> None:
    deadline = time.monotonic() + seconds
    while not until():
        assert time.monotonic() < deadline, "no such events came"
        if socket.poll(100):
            index.apply(socket.recv_multipart())


@pytest.fixture
def replica(tmp_path: Path) -> Iterator[tuple[Served, str]]:
    """A replica whose KV pool holds 16 blocks (512 tokens), its events on a loopback port."""
    extra = tmp_path / "extra.yml"
    extra.write_text(yaml.safe_dump({"kv_cache_config": {"max_tokens": 16 * BLOCK}}))
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    server = Served(
        [
            str(make_checkpoint(tmp_path)),
            "--engine",
            "trtllm",
            "--kv_events_endpoint",
            endpoint,
            "--kv_events_replica_id",
            "replica-a",
            "--extra_llm_api_options",
            str(extra),
        ],
        tmp_path / "trtllm.log",
    )
    yield server, endpoint
    out = server.stop()
    assert "Traceback" not in out, out


def test_a_routers_subscriber_sees_a_turns_blocks_stored_then_evicted(replica: tuple[Served, str]) -> None:
    served, endpoint = replica
    [init] = served.records("init")
    assert init["args"]["kv_cache_config"]["event_buffer_max_size"] > 0  # set because events were asked for
    index = RouterIndex(b"replica-a")
    socket = _subscribe(endpoint, index.topic)
    time.sleep(0.5)  # a SUB socket receives only what is sent after it joined
    encoding = load_encoding()
    try:
        with httpx.Client(base_url=served.url, timeout=30) as client:
            first = client.post("/v1/responses", json={"input": "the first session, turn one. " * 8}).json()
            _read(socket, index, lambda: index.stored_events)
            held = index.held[0]
            text = encoding.decode([t for tokens in held.values() for t in tokens])
            assert "the first session, turn one" in text  # the turn's prompt blocks, as tokens
            assert index.stored_events[0]["parent_block_hash"] is None  # a sequence's first block
            before = set(held)
            # Another conversation, longer than the pool: the first one's blocks are evicted.
            client.post("/v1/responses", json={"input": "another conversation " * 300})
            _read(socket, index, lambda: before & set(index.removed))
            assert len(index.held[0]) <= 16  # the router's picture is no larger than the pool
            # The first session's next turn finds less than its prefix: the router knew it would.
            again = client.post(
                "/v1/responses", json={"input": "turn two", "previous_response_id": first["id"]}
            ).json()
            cached = again["usage"]["input_tokens_details"]["cached_tokens"]
            assert cached < len(before) * BLOCK
    finally:
        socket.close(0)
    assert index.sequences == sorted(index.sequences) and len(set(index.sequences)) == len(index.sequences)
    assert index.ranks == {0}


def test_events_carry_the_attention_dp_rank_a_turn_ran_on(tmp_path: Path) -> None:
    extra = tmp_path / "extra.yml"
    extra.write_text(yaml.safe_dump({"enable_attention_dp": True}))
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    served = Served(
        [
            str(make_checkpoint(tmp_path)),
            "--engine",
            "trtllm",
            "--tp_size",
            "2",
            "--kv_events_endpoint",
            endpoint,
            "--extra_llm_api_options",
            str(extra),
        ],
        tmp_path / "trtllm.log",
    )
    index = RouterIndex(f"127.0.0.1:{served.port}".encode())  # the default id: --host:--port
    socket = _subscribe(endpoint, index.topic)
    time.sleep(0.5)
    try:
        with httpx.Client(base_url=served.url, timeout=30) as client:
            names = [f"s-{i}" for i in range(16)]
            sessions = [next(n for n in names if attention_dp_rank(n, 2) == rank) for rank in (0, 1)]
            for session in sessions:
                client.post(
                    "/v1/responses",
                    json={"input": f"session {session}. " * 8},
                    headers={"x-session-id": session},
                )
        ranks = {record["attention_dp_rank"] for record in served.records("generate")}
        assert len(ranks) == 2  # a session on each rank (the fake's log says where each ran)
        _read(socket, index, lambda: index.ranks == ranks)
        for rank in ranks:
            text = load_encoding().decode([t for tokens in index.held[rank].values() for t in tokens])
            assert "session s-" in text
    finally:
        socket.close(0)
        out = served.stop()
    assert "Traceback" not in out, out


def test_the_flags_off_by_default_and_only_for_trtllm() -> None:
    from trtllm_responses.cli.command import _build_executor, _kv_events, build_parser
    from trtllm_responses.cli.launch import LaunchError

    def args(*flags: str) -> Any:
        return build_parser().parse_args(["serve", *flags])

    assert _kv_events(args()) is None
    named = _kv_events(args("--kv_events_endpoint", "tcp://127.0.0.1:5557", "--port", "9000"))
    assert named is not None and named.replica_id == "127.0.0.1:9000"
    wildcard = _kv_events(args("--kv_events_endpoint", "tcp://*:5557", "--host", "0.0.0.0"))
    assert (
        wildcard is not None
        and wildcard.replica_id.endswith(":8000")
        and not wildcard.replica_id.startswith("0.")
    )
    with pytest.raises(LaunchError, match="needs --kv_events_endpoint"):
        _kv_events(args("--kv_events_replica_id", "r1"))
    with pytest.raises(LaunchError, match="--kv_events_endpoint"):
        _build_executor(args("--kv_events_endpoint", "tcp://127.0.0.1:5557"), "echo")
