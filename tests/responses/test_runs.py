"""Runs: the one registry of a process's runs (docs/architecture.md#the-runs-life).

A run is in it while it is driven (it enters and leaves itself); a background run is kept, its events
recorded in the transport's framing, while it runs and for its grace period after, within its budgets;
``GET``, ``DELETE`` and ``cancel`` are answered from it, then from the store. And a run's state is read-only
from outside: its live fields are properties, written by the run and its own driver alone.
"""

from __future__ import annotations

import ast
import asyncio
from pathlib import Path
from typing import Any

import orjson
import pytest
from openai.types.responses import ResponseStreamEvent
from support.server_harness import RecordingEcho

import trtllm_responses.responses as responses_layer
from trtllm_responses.adapter.adapter import HarmonyAdapter
from trtllm_responses.core import InvalidRequestError, NotFoundError, TooManyRequestsError
from trtllm_responses.harmony.encoding import HarmonyEncoding
from trtllm_responses.responses import BackgroundLimits, ResponseRun, ResponsesService, RunState
from trtllm_responses.store import ConversationHistoryStore

_TERMINAL = (b"response.completed ", b"response.incomplete ", b"response.failed ", b"response.cancelled ")


class LineFraming:
    """A framing of one line an event (``type sequence_number``): what the registry keeps is the transport's."""

    def obfuscated(self, stream_options: dict[str, Any] | None) -> bool:
        return False

    def frame(self, event: ResponseStreamEvent, obfuscated: bool) -> bytes:
        return b"%s %d\n" % (event.type.encode(), event.sequence_number)

    def is_terminal(self, frame: bytes) -> bool:
        return frame.startswith(_TERMINAL)

    def failed(self, response: dict[str, Any], sequence_number: int) -> bytes:
        return b"response.failed %d\n" % sequence_number


def service_on(executor: RecordingEcho, adapter: HarmonyAdapter, **limits: Any) -> ResponsesService:
    return ResponsesService(
        executor=executor,
        store=ConversationHistoryStore(10, 1 << 20),
        adapter=adapter,
        model_name="m",
        background_limits=BackgroundLimits(**limits),
        framing=LineFraming(),
    )


async def created(service: ResponsesService, text: str, **body: Any) -> ResponseRun:
    return service.run(await service.prepare(await service.decode(orjson.dumps({"input": text, **body}))))


def test_a_run_is_live_in_the_registry_only_while_it_is_driven(
    encoding: HarmonyEncoding, adapter: HarmonyAdapter
) -> None:
    service = service_on(RecordingEcho(encoding, tokens_per_second=2000), adapter)
    runs = service.runs

    async def main() -> None:
        run = await created(service, "#lorem 20")
        assert dict(runs.live) == {} and runs.find(run.id) is None
        seen: list[dict[str, ResponseRun]] = []

        async def deliver(step: list[Any]) -> None:
            seen.append(dict(runs.live))

        await run.drive(deliver)
        assert seen and all(live == {run.id: run} for live in seen)
        assert dict(runs.live) == {} and runs.get(run.id) is None  # a foreground run is never kept

    asyncio.run(main())


def test_a_background_run_is_kept_replayable_for_its_grace_then_forgotten(
    encoding: HarmonyEncoding, adapter: HarmonyAdapter
) -> None:
    service = service_on(RecordingEcho(encoding, tokens_per_second=2000), adapter, grace=3600.0)
    runs = service.runs

    async def main() -> None:
        run = await created(service, "#lorem 20", background=True)
        kept = await service.start_background(run)
        assert runs.get(run.id) is kept and runs.active == 1
        assert orjson.loads(await service.retrieve(run.id))["status"] == "queued"  # before its drive starts
        assert kept.task is not None
        await kept.task
        assert kept.done and runs.active == 0 and runs.find(run.id) is None
        frames = b"".join([chunk async for chunk in await service.replay(run.id, None)]).splitlines()
        assert frames[0].startswith(b"response.created 0") and frames[-1].startswith(b"response.completed")
        assert len(frames) == kept.next_sequence and runs.recorded_bytes == kept.nbytes
        tail = [chunk async for chunk in await service.replay(run.id, len(frames) - 2)]
        assert tail == [frames[-1] + b"\n"]
        assert orjson.loads(await service.retrieve(run.id))["status"] == "completed"  # the stored one
        runs.limits = BackgroundLimits(grace=0.0)
        runs._reap()
        assert runs.get(run.id) is None and runs.recorded_bytes == 0
        with pytest.raises(InvalidRequestError, match="no longer kept"):
            await service.replay(run.id, None)
        assert orjson.loads(await service.retrieve(run.id))["status"] == "completed"

    asyncio.run(main())


def test_background_runs_past_the_cap_are_refused_and_cancel_ends_one(
    encoding: HarmonyEncoding, adapter: HarmonyAdapter
) -> None:
    service = service_on(RecordingEcho(encoding, tokens_per_second=200), adapter, max_running=1)

    async def main() -> None:
        first = await service.start_background(await created(service, "#lorem 5000", background=True))
        with pytest.raises(TooManyRequestsError):
            await service.start_background(await created(service, "one more", background=True))
        cancelled = orjson.loads(await service.cancel(first.id))
        assert cancelled["status"] == "cancelled" and first.done
        again = await service.start_background(await created(service, "#lorem 3", background=True))
        assert again.task is not None and orjson.loads(await again.task)["status"] == "completed"

    asyncio.run(main())


def test_delete_cancels_and_forgets_a_kept_run_and_its_stored_response(
    encoding: HarmonyEncoding, adapter: HarmonyAdapter
) -> None:
    service = service_on(RecordingEcho(encoding, tokens_per_second=200), adapter)

    async def main() -> None:
        kept = await service.start_background(await created(service, "#lorem 5000", background=True))
        deleted = orjson.loads(await service.delete(kept.id))
        assert deleted == {"id": kept.id, "object": "response.deleted", "deleted": True}
        assert kept.done and service.runs.get(kept.id) is None and service.runs.recorded_bytes == 0
        for answer in (service.retrieve(kept.id), service.delete(kept.id), service.cancel(kept.id)):
            with pytest.raises(NotFoundError):
                await answer

    asyncio.run(main())


def test_only_background_responses_are_cancelled_or_replayed(
    encoding: HarmonyEncoding, adapter: HarmonyAdapter
) -> None:
    service = service_on(RecordingEcho(encoding, tokens_per_second=2000), adapter)

    async def main() -> None:
        run = await created(service, "#lorem 5")
        await run.drive()
        with pytest.raises(InvalidRequestError, match="not a background response"):
            await service.cancel(run.id)
        with pytest.raises(InvalidRequestError, match="background=true"):
            await service.replay(run.id, None)

    asyncio.run(main())


def test_abort_all_ends_running_and_queued_background_runs(
    encoding: HarmonyEncoding, adapter: HarmonyAdapter
) -> None:
    service = service_on(RecordingEcho(encoding, tokens_per_second=200), adapter)

    async def main() -> None:
        kept = await service.start_background(await created(service, "#lorem 5000", background=True))
        assert service.abort_all() == 0  # queued: not driven yet, and aborted all the same
        assert kept.task is not None
        final = orjson.loads(await kept.task)
        assert final["status"] == "failed"
        late = await created(service, "#lorem 5")  # made after abort_all: aborted from the start
        assert orjson.loads(await late.drive())["status"] == "failed"

    asyncio.run(main())


def test_without_a_framing_no_run_starts_in_the_background(
    encoding: HarmonyEncoding, adapter: HarmonyAdapter
) -> None:
    service = ResponsesService(
        executor=RecordingEcho(encoding),
        store=ConversationHistoryStore(10, 1 << 20),
        adapter=adapter,
        model_name="m",
    )

    async def main() -> None:
        with pytest.raises(RuntimeError, match="framing"):
            await service.start_background(await created(service, "x", background=True))

    asyncio.run(main())


#: A run's live state, each read through a property (what nobody outside the run and its driver writes).
LIVE = ("prepared", "id", "state", "stream", "usage", "first_token_at", "final_json", "store_failed")


def test_a_runs_state_is_read_only_from_outside(encoding: HarmonyEncoding, adapter: HarmonyAdapter) -> None:
    service = service_on(RecordingEcho(encoding, tokens_per_second=2000), adapter)

    async def main() -> ResponseRun:
        run = await created(service, "#lorem 5")
        await run.drive()
        return run

    run = asyncio.run(main())
    assert run.state is RunState.ENDED and run.stream is not None and run.final_json is not None
    assert run.usage is not None and run.first_token_at is not None and not run.store_failed
    for name in (*LIVE, "cancelled", "interrupted", "done"):
        with pytest.raises(AttributeError):
            setattr(run, name, None)
    for gone in ("generating", "summarizing", "tool_loop"):  # the driver's, which only the run holds
        assert not hasattr(run, gone), gone


def test_only_the_run_and_its_driver_write_a_runs_private_state() -> None:
    """``x._state = …`` (any private field of a run, on anything but ``self``) appears nowhere in the package,
    and the driver's fields are assigned only in ``generation.py``."""
    package = Path(responses_layer.__file__).parent.parent
    private = {"_state", "_final_json", "_driver", "_prepared", "_cancelled", "_interrupted", "_stop_reason"}
    driver = {"generating", "summarizing", "tool_loop", "store_failed"}
    found = []
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            targets = node.targets if isinstance(node, ast.Assign) else []
            for target in targets:
                if not isinstance(target, ast.Attribute):
                    continue
                on_self = isinstance(target.value, ast.Name) and target.value.id == "self"
                if (target.attr in private and not on_self) or (
                    target.attr in driver and path.name != "generation.py"
                ):
                    found.append(f"{path.name}:{node.lineno}:.{target.attr}")
    assert found == []
