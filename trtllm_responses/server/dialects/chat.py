"""``POST /v1/chat/completions``: a chat request driven through the Responses path, written as chat.

The request is translated at its edge (``request/chat.py``) into the service's request;
``ResponsesService.prepare`` checks and renders it (the same prompt, tools and
Constraint as ``POST /v1/responses``) and ``drive`` generates it through the executor,
the Harmony reader and the stream state machine. Only the writing differs: each
choice's typed events go through a :class:`~.chat_chunks.ChatChoice` into chat
chunks (``stream: true``) or a ``chat.completion`` object (the pieces every dialect shares: ``edge.py``).

``n`` > 1 prepares the prompt once and drives one generation per choice, concurrently
(a ``seed`` given is ``seed + i`` for choice ``i``, so choices differ and repeat).
Chat completions are never stored.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import time
from collections.abc import Awaitable
from typing import Any

import orjson
from openai.types.responses import ResponseStreamEvent
from starlette.responses import Response
from starlette.types import Send

from ...core import APIError, LoopSteps, ServerError, new_id
from ...request import ChatOptions, session_identity, translating_chat
from ...responses import Admission, Origin, PreparedResponse, ResponseRun, ResponsesService
from ..call import Call
from .chat_chunks import DONE, ChatChoice, ChunkFrames, chat_usage
from .edge import NOTHING, Deliver, drive_writing, quietly, read_request, respond, writing

__all__ = ["CHAT_PATH", "ChatCompletionRun", "create_chat_completion"]

CHAT_PATH = "/v1/chat/completions"


class ChatCompletionRun:
    """One chat completion: its choices' generations, driven and written as chat."""

    def __init__(
        self,
        service: ResponsesService,
        prepared: PreparedResponse,
        options: ChatOptions,
        admission: Admission | None = None,
    ) -> None:
        self.service = service
        self.options = options
        self.id = f"chatcmpl-{os.urandom(16).hex()}"
        self.created = int(time.time())
        self.model = prepared.response.model
        #: The tier it is served in (``service_tier``: as ``/v1/responses`` answers it).
        self.service_tier = prepared.response.service_tier or "default"
        prepared_choices = [prepared] + [self._another(prepared, i) for i in range(1, options.n)]
        #: One run per choice.
        self.runs = [service.run(p, admission) for p in prepared_choices]
        self.frames = (
            ChunkFrames(
                self.id,
                self.created,
                self.model,
                service_tier=self.service_tier,
                include_usage=options.include_usage,
                obfuscated=options.include_obfuscation,
            )
            if options.stream
            else None
        )
        #: The first choice's failure (the others are then stopped, and fail as cancelled).
        self.error: ServerError | None = None
        self.choices = [
            ChatChoice(
                i,
                self.frames,
                stop=options.stop,
                logprobs=options.logprobs,
                on_stop=run.cancel,  # a stop string ended the text: the rest is not generated
            )
            for i, run in enumerate(self.runs)
        ]

    def _another(self, prepared: PreparedResponse, index: int) -> PreparedResponse:
        """Choice ``index``: the same prompt, a generation of its own."""
        response_id = new_id("resp")
        sampling = prepared.generation.sampling
        if self.options.seed is not None and sampling.seed is not None:  # None: the engine does not apply it
            sampling = dataclasses.replace(sampling, seed=self.options.seed + index)
        return dataclasses.replace(
            prepared,
            generation=dataclasses.replace(prepared.generation, request_id=response_id, sampling=sampling),
            response=prepared.response.model_copy(update={"id": response_id}),
        )

    @property
    def usage(self) -> dict[str, Any] | None:
        """The request's usage, once every choice has ended."""
        usages = [c.usage for c in self.choices]
        if any(u is None for u in usages):
            return None
        return chat_usage(usages)  # type: ignore[arg-type]

    # -- non-streaming ---------------------------------------------------------------------------

    async def json(self) -> bytes:
        """Generate every choice; the ``chat.completion`` object. A failed generation is a 500."""

        async def drive(run: ResponseRun, choice: ChatChoice) -> None:
            await run.drive(quietly(choice.feed))
            self._ended(run, choice)

        await self._all([drive(r, c) for r, c in zip(self.runs, self.choices, strict=True)])
        if self.error is not None:
            raise self.error
        choices = []
        for choice in self.choices:
            choices.append(orjson.dumps(choice.choice_json()))
            if self.options.logprobs:  # up to ~1 MiB of logprobs a choice: one choice per turn of the loop
                await asyncio.sleep(0)
        return orjson.dumps(
            {
                "id": self.id,
                "object": "chat.completion",
                "created": self.created,
                "model": self.model,
                "system_fingerprint": None,
                "service_tier": self.service_tier,
                "choices": orjson.Fragment(b"[" + b",".join(choices) + b"]"),
                "usage": self.usage,
            }
        )

    # -- streaming -------------------------------------------------------------------------------

    async def stream(self, send: Send) -> None:
        """Write the chunks of every choice, the usage chunk (``include_usage``), then ``[DONE]``.

        A generation that fails ends the stream with one error chunk (the other choices are
        stopped), then ``[DONE]``.
        """
        frames = self.frames
        assert frames is not None
        opening = frames.obfuscate(b"".join(frames.role(c.index) for c in self.choices))
        await send({"type": "http.response.body", "body": opening, "more_body": True})
        if len(self.choices) == 1:
            await self._drive_one(self.runs[0], self.choices[0], send)
        else:
            lock = asyncio.Lock()

            async def locked_send(message: Any) -> None:
                async with lock:
                    await send(message)

            await self._all(
                [self._drive_one(r, c, locked_send) for r, c in zip(self.runs, self.choices, strict=True)]
            )
        if self.error is not None:
            tail = frames.error(self.error) + DONE
        else:
            usage = self.usage if self.options.include_usage else None
            tail = frames.obfuscate(frames.usage(usage) if usage is not None else b"") + DONE
        await send({"type": "http.response.body", "body": tail, "more_body": True})

    async def _drive_one(self, run: ResponseRun, choice: ChatChoice, send: Send) -> None:
        await drive_writing(run, self._deliver(choice, send), choice, f"Chat completion {self.id}")
        self._ended(run, choice)

    def _deliver(self, choice: ChatChoice, send: Send) -> Deliver:
        """What a choice writes of each step: its chunks, obfuscated when asked; nothing once another
        choice failed (the stream then ends with that failure)."""
        frames = self.frames
        assert frames is not None
        several = len(self.choices) > 1
        if not several and not frames.obfuscated:
            return writing(choice.feed, send)

        def deliver(events: list[ResponseStreamEvent]) -> Awaitable[None]:
            # Returns send's own awaitable: no extra coroutine frame per engine step.
            data = choice.feed(events)
            if not data or (several and self.error is not None):
                return NOTHING
            return send({"type": "http.response.body", "body": frames.obfuscate(data), "more_body": True})

        return deliver

    def _ended(self, run: ResponseRun, choice: ChatChoice) -> None:
        """A choice's generation ended: if it failed, the request fails with its error, and the others stop."""
        if choice.error is None or self.error is not None:
            return
        self.error = choice.error
        for other in self.runs:
            if other is not run:
                other.abort()

    @staticmethod
    async def _all(runs: list[Awaitable[None]]) -> None:
        """Await the runs (concurrently when several); cancelling this cancels each of them."""
        if len(runs) == 1:
            await runs[0]
            return
        tasks = [asyncio.ensure_future(run) for run in runs]
        try:
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()


async def create_chat_completion(service: ResponsesService, call: Call) -> Response:
    """Serve one ``POST /v1/chat/completions``: a ``chat.completion``, or a stream of chunks."""
    identity = session_identity(call.headers)
    body = await read_request(call, service)
    with service.working():  # not idle time for the GC schedule
        received = time.perf_counter()
        steps = LoopSteps()  # the translation's, which the preparation continues
        translation = await steps.through(translating_chat(body))
        try:
            origin = Origin(
                received_at=received,
                identity=identity,
                sent_bytes=body.size,
                choices=translation.options.n,
                tenant=call.tenant,
                steps=steps,
            )
            prepared = await service.prepare(await service.body_of(translation.body, origin), origin)
        except APIError as exc:
            raise translation.in_own_terms(exc) from None
    answer = ChatCompletionRun(service, prepared, translation.options, await call.admit(service, prepared))
    call.record.session_id = prepared.session_key
    return await respond(call, answer, translation.options.stream)
