"""The echo executor: no model, deterministic Harmony completions, one token per step.

Tests, clients and benchmarks rely on its rules exactly: what each last message is answered
(first matching rule wins), the summarization and reasoning-summary runs, its logprobs and its
pace are docs/echo-executor.md#the-echo-executor. Like an engine it stops at ``max_tokens`` or at the first
stop token, and its cost depends on the last message, not on the conversation's length.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
import types
from collections.abc import AsyncGenerator, Generator, Sequence
from typing import TYPE_CHECKING, Any

from ..harmony import JSON_CONTENT_TYPE, HarmonyEncoding, minimal_instance
from .base import Executor, FinishReason, GenerationRequest, TokenDelta

if TYPE_CHECKING:
    from ..constraints import Constraint

__all__ = ["PLAN_ON_LOOP_TOKENS", "EchoExecutor"]

#: Prompts up to this many tokens are planned on the event loop (well under a millisecond); longer ones
#: in a thread: a plan costs what its last message does, and the prompt's length bounds that cheaply.
PLAN_ON_LOOP_TOKENS = 16_384


@types.coroutine
def _next_step() -> Generator[None, None, None]:
    """Let the event loop run others between steps (what ``asyncio.sleep(0)`` does, minus its checks)."""
    yield


_COMPACTING = "# Instructions\n\nYou are compacting this conversation"
_SUMMARIZING = "# Instructions\n\nYou are summarizing an assistant's private reasoning"
_FIRST_SENTENCE = re.compile(r"\s*(.*?[.!?])(?=\s|$)", re.DOTALL)
_CONVERSATION_ROLES = frozenset({"user", "assistant", "system", "developer", ""})
_LOREM = re.compile(r"#lorem (\d+)")
_CALL = re.compile(r"call ([A-Za-z0-9_\-.]+) (\{.*\})", re.DOTALL)
_CALL_TEXT = re.compile(r"call ([A-Za-z0-9_\-.]+) (.*)", re.DOTALL)
_FREEFORM_DECL = re.compile(
    r"^// This tool takes freeform text, not JSON.*?\ntype ([A-Za-z0-9_\-]+) = \(_: string\) => any;",
    re.M | re.S,
)
_NAMESPACE = re.compile(r"^namespace ([A-Za-z0-9_\-]+) \{$(.*?)^\} // namespace \1$", re.M | re.S)
_CALL_PYTHON = re.compile(r"call python\s(.*)", re.DOTALL)
_SEARCH = re.compile(r"#search (.+)", re.DOTALL)
#: The recipient a client-run tool search is called as, and answered from (``harmony/tools.py``).
_TOOL_SEARCH = "functions.tool_search"
_STEPS = "#steps\n"
#: Claude Code puts ``<system-reminder>`` blocks (attribution, context) before the user's own words: the
#: rules read a message with them removed.
_REMINDER_OPEN = "<system-reminder>"
_REMINDER_CLOSE = "</system-reminder>"
#: What a message's text must start with for a rule other than echoing to read it (``#harmony``,
#: ``#prompt``, ``#lorem``, ``#steps``, ``call ...``); a longer message is decoded only if its
#: first _HEAD_TOKENS tokens do.
_RULE_PREFIXES = ("#", "call", _REMINDER_OPEN)
_HEAD_TOKENS = 16
#: Tokens one C call of the plan copies or searches at most (``_copied``): well under a millisecond.
_CHUNK = 8192
_FUNCTION_DECL = re.compile(r"^type ([A-Za-z0-9_\-]+) = \((.*)$")
_PROPERTY = re.compile(r"^([A-Za-z0-9_$\-]+)(\??): (.*?),?(?:\s*//.*)?$")
_FILLER_WORDS = (
    " lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor incididunt ut labore et"
    " dolore magna aliqua"
)


def _without_reminders(text: str) -> str:
    """``text`` without the ``<system-reminder>`` blocks it begins with (Claude Code's); one pass over it."""
    while text.startswith(_REMINDER_OPEN):
        end = text.find(_REMINDER_CLOSE, len(_REMINDER_OPEN))
        if end < 0:
            break
        text = text[end + len(_REMINDER_CLOSE) :].lstrip()
    return text


def _copied(tokens: Sequence[int], start: int = 0, end: int | None = None) -> list[int]:
    """``tokens[start:end]`` as a new list, copied :data:`_CHUNK` tokens at a time: one C call on 300k
    tokens holds the GIL 10-30 ms (each token's refcount touched), a loop of small ones lets the event
    loop's thread take it between them (the plan runs in a thread, ``EchoExecutor.generate``)."""
    return _extend([], tokens, start, end)


def _extend(out: list[int], tokens: Sequence[int], start: int = 0, end: int | None = None) -> list[int]:
    """``out`` extended by ``tokens[start:end]``, :data:`_CHUNK` tokens at a time (``_copied``)."""
    end = len(tokens) if end is None else end
    for at in range(start, end, _CHUNK):
        out += tokens[at : min(at + _CHUNK, end)]
    return out


def _decoded(encoding: HarmonyEncoding, tokens: Sequence[int]) -> str:
    """``encoding.decode(tokens)``, the bytes joined :data:`_CHUNK` tokens at a time (``_copied``)."""
    table = encoding.token_bytes
    parts = [b"".join([table[t] for t in tokens[at : at + _CHUNK]]) for at in range(0, len(tokens), _CHUNK)]
    return b"".join(parts).decode("utf-8", "replace")


def _cut(tokens: list[int], length: int) -> list[int]:
    """``tokens`` cut to ``length`` in place, from its end :data:`_CHUNK` tokens at a time (``_copied``)."""
    while len(tokens) > length:
        del tokens[max(length, len(tokens) - _CHUNK) :]
    return tokens


def _last_index(tokens: Sequence[int], token: int, end: int) -> int:
    """The index of the last ``token`` before ``end`` (ValueError if none), searched a chunk at a time from
    the end, never by copying the whole prompt reversed."""
    hi = end
    while hi > 0:
        lo = max(0, hi - _CHUNK)
        window = tokens[lo:hi]
        if token in window:
            return hi - 1 - window[::-1].index(token)
        hi = lo
    raise ValueError(token)


def _value_for(type_text: str, user_text: str) -> Any:
    """A value for a parameter of the rendered TypeScript type ``type_text``."""
    type_text = type_text.strip()
    if type_text.startswith('"'):
        return json.loads(type_text.split(" | ")[0])
    if " | " in type_text:
        return _value_for(type_text.split(" | ")[0], user_text)
    if type_text.endswith("[]"):
        return []
    if type_text.startswith("{"):
        return {}
    return {"string": user_text, "number": 1, "boolean": True}.get(type_text)


def _arguments_for(declaration: list[str], user_text: str) -> dict[str, Any]:
    """Arguments for the required top-level parameters of a rendered function declaration."""
    args: dict[str, Any] = {}
    for i, line in enumerate(declaration):
        match = _PROPERTY.match(line)
        if match is None or match.group(2):
            continue
        name, type_text = match.group(1), match.group(3)
        if type_text == "{":
            # A multi-line object; its closing line says whether it is an array of them.
            closing = next((ln for ln in declaration[i + 1 :] if ln.startswith("    }")), "    },")
            args[name] = [] if closing.strip().startswith("}[]") else {}
        else:
            args[name] = _value_for(type_text, user_text)
    return args


class EchoExecutor(Executor):
    """A stand-in for the model: deterministic Harmony completions streamed one token per step.

    ``tokens_per_second`` paces the stream (0: as fast as the consumer takes it).
    """

    name = "echo"

    def __init__(
        self, encoding: HarmonyEncoding, *, tokens_per_second: float = 0.0, max_seq_len: int = 131072
    ) -> None:
        self._enc = encoding
        self._interval = 1.0 / tokens_per_second if tokens_per_second > 0 else 0.0
        self.max_seq_len = max_seq_len
        self._running: set[str] = set()
        self._aborted: set[str] = set()
        self._developer = encoding.encode("developer")[0]
        self._user = encoding.encode("user")[0]
        self._assistant = encoding.encode("assistant")[0]
        self._filler = encoding.encode_plain(_FILLER_WORDS)
        self._final_start = encoding.encode("<|start|>assistant<|channel|>final<|message|>")
        self._functions_marker = "Calls to these tools must go to the commentary channel: 'functions'."

    # -- the plan --------------------------------------------------------------------------

    def _segment(self, header: str, body: str, terminator: str) -> list[int]:
        return self._enc.encode(header) + self._enc.encode_plain(body) + self._enc.encode(terminator)

    def _answer(self, analysis: str, final: str | Sequence[int]) -> list[int]:
        tokens = self._segment("<|channel|>analysis<|message|>", analysis, "<|end|>")
        tokens += self._final_start
        if isinstance(final, str):
            tokens += self._enc.encode_plain(final)
        else:
            _extend(tokens, final)
        tokens.append(self._enc.return_)
        return tokens

    def _tool_answer(
        self, name: str, body: str, body_tokens: Sequence[int], constraint: Constraint | None
    ) -> list[int]:
        """The answer to a tool's output: ``NAME returned: C``, or in JSON when a format constrains it."""
        if constraint is not None and constraint.final == "json":
            instance = minimal_instance(constraint.schema or {"type": "object"}, f"{name} returned: {body}")
            return self._answer(
                "Answering in JSON.", json.dumps(instance, ensure_ascii=False, separators=(",", ":"))
            )
        return self._answer(
            f"Got {name} output.", _extend(self._enc.encode_plain(f"{name} returned: "), body_tokens)
        )

    def _call(self, name: str, arguments: str, *, custom: bool = False) -> list[int]:
        """Analysis ``Calling NAME.`` then a call to NAME (``functions.NAME`` unless it has a namespace)."""
        tokens = self._segment("<|channel|>analysis<|message|>", f"Calling {name}.", "<|end|>")
        content_type = "" if custom else f" {JSON_CONTENT_TYPE}"
        if name.startswith("browser."):  # gpt-oss's built-in browser: the header it was trained to write
            header = f"<|start|>assistant<|channel|>analysis to={name} code<|message|>"
        elif "." in name:  # a namespace's tool, in the header Harmony itself renders for such a call
            header = f"<|start|>assistant to={name}<|channel|>commentary{content_type}<|message|>"
        else:
            recipient = "python" if name == "python" else f"functions.{name}"
            header = f"<|start|>assistant<|channel|>commentary to={recipient}{content_type}<|message|>"
        return tokens + self._segment(header, arguments, "<|call|>")

    def _call_found(self, body: str) -> list[int] | None:
        """A call to the first tool a tool search loaded (its ``loaded_tools`` JSON, ``input_messages.py``), with
        its required parameters (strings: the tool's name); None when it loaded none."""
        try:
            loaded = json.loads(body).get("loaded_tools") or []
        except (ValueError, AttributeError):
            return None
        if not loaded or not isinstance(loaded[0], dict) or not isinstance(loaded[0].get("call"), str):
            return None
        recipient: str = loaded[0]["call"]
        name = recipient.removeprefix("functions.")
        short = name.rpartition(".")[2]
        if "parameters" not in loaded[0]:  # a custom (freeform) tool
            return self._call(name, short, custom=True)
        arguments = minimal_instance(loaded[0]["parameters"] or {"type": "object"}, short)
        return self._call(name, json.dumps(arguments, ensure_ascii=False, separators=(",", ":")))

    def _custom_tools(self, prompt: Sequence[int]) -> set[str]:
        """Recipients-as-named (``NAME`` in functions, ``NS.NAME`` elsewhere) of declared freeform tools."""
        names: set[str] = set()
        for namespace, body in _NAMESPACE.findall(self._developer_text(prompt)):
            for name in _FREEFORM_DECL.findall(body):
                names.add(name if namespace == "functions" else f"{namespace}.{name}")
        return names

    def _python_call(self, code: str) -> list[int]:
        tokens = self._segment("<|channel|>analysis<|message|>", "Calling python.", "<|end|>")
        return tokens + self._segment(
            "<|start|>assistant<|channel|>analysis to=python code<|message|>", code, "<|call|>"
        )

    def _act(self, text: str) -> list[int] | None:
        """A call for ``call python CODE`` / ``call NAME {json}`` text, else None."""
        python = _CALL_PYTHON.fullmatch(text)
        if python:
            return self._python_call(python.group(1))
        call = _CALL.fullmatch(text)
        if call:
            return self._call(call.group(1), call.group(2))
        return None

    def _script_step(self, prompt: Sequence[int]) -> list[int] | None:
        """The next step of a ``#steps`` user message, when the last user message is one."""
        enc = self._enc
        start = enc.start
        i = len(prompt) - 3
        tool_messages = 0
        while i >= 0:
            if prompt[i] == start:
                role = prompt[i + 1]
                if role == self._user:
                    break
                if role != self._assistant:
                    tool_messages += 1
            i -= 1
        if i < 0:
            return None
        try:
            body_start = prompt.index(enc.message, i) + 1
            body_end = prompt.index(enc.end, body_start)
        except ValueError:
            return None
        body = _without_reminders(enc.decode(prompt[body_start:body_end]))
        if not body.startswith(_STEPS):
            return None
        steps = re.split(r"\n---\n", body[len(_STEPS) :])
        step = steps[min(tool_messages, len(steps) - 1)].strip()
        if step.startswith("#harmony\n"):  # a raw step: what a real model wrote at that point
            return self._enc.encode(step[len("#harmony\n") :])
        return self._act(step) or self._answer("Answering.", step)

    def _last_message(self, prompt: Sequence[int]) -> tuple[str, Sequence[int]]:
        """Header text and body tokens of the message before the final ``<|start|>assistant``.

        Found with list searches (C), not a Python loop: a long message costs a copy, not a scan.
        """
        start = self._enc.start
        end = len(prompt) - 2  # prompt ends with <|start|>assistant
        if end < 1:
            return "", ()
        try:
            i = _last_index(prompt, start, end)
        except ValueError:
            return "", ()
        body_end = end - 1 if prompt[end - 1] in self._enc.message_terminators else end
        try:
            body_start = prompt.index(self._enc.message, i + 1, body_end) + 1
        except ValueError:
            body_start = body_end
        header = self._enc.decode(prompt[i + 1 : body_start - 1])
        return header, _copied(prompt, body_start, body_end)

    def _declared_functions(self, prompt: Sequence[int]) -> list[tuple[str, list[str]]]:
        """(name, declaration lines) of the functions the developer message declares, in order."""
        enc = self._enc
        try:
            system_end = prompt.index(enc.end)
        except ValueError:
            return []
        if self._functions_marker not in enc.decode(prompt[:system_end]):
            return []
        if prompt[system_end + 1 : system_end + 3] != [enc.start, self._developer]:
            return []
        developer_end = prompt.index(enc.end, system_end + 1)
        text = enc.decode(prompt[system_end + 3 : developer_end])
        _, _, namespace = text.partition("namespace functions {")
        functions: list[tuple[str, list[str]]] = []
        for line in namespace.splitlines():
            match = _FUNCTION_DECL.match(line)
            if match:
                functions.append((match.group(1), []))
            elif functions:
                functions[-1][1].append(line)
        return functions

    def _developer_text(self, prompt: Sequence[int]) -> str:
        """The body of the developer message right after the system message ('' if none)."""
        enc = self._enc
        try:
            system_end = prompt.index(enc.end)
        except ValueError:
            return ""
        if prompt[system_end + 1 : system_end + 3] != [enc.start, self._developer]:
            return ""
        developer_end = prompt.index(enc.end, system_end + 1)
        return enc.decode(prompt[system_end + 3 : developer_end]).partition("<|message|>")[2]

    def _summary(self, prompt: Sequence[int]) -> list[int] | None:
        """A reasoning summary's side generation (``responses/summaries.py``): ``Summary: `` + the first sentence.

        Its prompt ends with the final channel opened and its developer instructions begin
        with the summarizer's; the text summarized is the user message before that.
        """
        n = len(self._final_start)
        if len(prompt) < n or list(prompt[-n:]) != self._final_start:
            return None
        if not self._developer_text(prompt).startswith(_SUMMARIZING):
            return None
        end = len(prompt) - n - 1  # the user message's <|end|>
        start = end - 1 - prompt[end - 1 :: -1].index(self._enc.start)
        body_start = prompt.index(self._enc.message, start, end) + 1
        text = " ".join(self._enc.decode(prompt[body_start:end]).split())
        match = _FIRST_SENTENCE.match(text)
        sentence = match.group(1) if match else text
        return self._enc.encode_plain(f"Summary: {sentence}") + [self._enc.return_]

    def plan(
        self, prompt: Sequence[int], max_tokens: int | None = None, constraint: Constraint | None = None
    ) -> list[int]:
        """The completion this executor streams for ``prompt`` (built no further than ``max_tokens``), obeying ``constraint``.

        Echoed text reuses the prompt's own tokens for it, so echoing costs a copy, not a tokenization.
        """
        summary = self._summary(prompt)
        if summary is not None:
            return summary
        header, body_tokens = self._last_message(prompt)
        # The rules read the body's text, but a long plain message (the usual echo) needs none of it:
        # it is decoded only when its first tokens could start a rule, or a rule needs the text.
        head = self._enc.decode(body_tokens[:_HEAD_TOKENS])
        if len(body_tokens) <= _HEAD_TOKENS or head.startswith(_RULE_PREFIXES):
            body = _decoded(self._enc, body_tokens)
            if body.startswith(_REMINDER_OPEN):
                body = _without_reminders(body)
                body_tokens = self._enc.encode_plain(body)
            return self._plan(prompt, max_tokens, constraint, header, body, body_tokens)
        if constraint is None and not self._declared_functions(prompt):
            role = header.split(" ", 1)[0].split("<|", 1)[0]
            if role in _CONVERSATION_ROLES and not self._developer_text(prompt).startswith(_COMPACTING):
                return self._answer("Echoing the user.", body_tokens)
        return self._plan(
            prompt, max_tokens, constraint, header, _decoded(self._enc, body_tokens), body_tokens
        )

    def _plan(
        self,
        prompt: Sequence[int],
        max_tokens: int | None,
        constraint: Constraint | None,
        header: str,
        body: str,
        body_tokens: Sequence[int],
    ) -> list[int]:
        """The completion for the last message (``header``, ``body``): a compaction's summary, the reply to a
        tool's output, a rule the body spells (``#lorem``, ``call``, ...), else what the request asks for."""
        if self._developer_text(prompt).startswith(_COMPACTING):
            return self._answer(
                "Summarizing the conversation.",
                f"Summary of a conversation of {len(prompt)} prompt tokens; the last message said: {body[:200]}",
            )
        role = header.split(" ", 1)[0].split("<|", 1)[0]
        if (
            role not in _CONVERSATION_ROLES
        ):  # a tool's output (``functions.*``: a client's; else the server's)
            return self._after_tool(prompt, constraint, role, body, body_tokens)
        ruled = self._rule(prompt, max_tokens, body)
        if ruled is not None:
            return ruled
        return self._requested(prompt, max_tokens, constraint, body, body_tokens)

    def _after_tool(
        self,
        prompt: Sequence[int],
        constraint: Constraint | None,
        role: str,
        body: str,
        body_tokens: Sequence[int],
    ) -> list[int]:
        """The reply to the output of the tool ``role``: a scripted step, a found tool called (client
        ``tool_search``) or an action chained (a server-run tool), else an answer showing the output."""
        scripted = self._script_step(prompt)  # a client's tool loop scripted by ``#steps`` (Claude Code's)
        if scripted is not None:
            return scripted
        if role.startswith("functions."):
            if role == _TOOL_SEARCH:
                found = self._call_found(body)
                if found is not None:
                    return found
            return self._tool_answer(role[len("functions.") :], body, body_tokens, constraint)
        chained = self._act(body)
        if chained:
            return chained
        return self._tool_answer(role, body, body_tokens, constraint)

    def _rule(self, prompt: Sequence[int], max_tokens: int | None, body: str) -> list[int] | None:
        """The completion a rule spelled by a user's ``body`` asks for (``#harmony``, ``#prompt``, a search,
        ``#lorem N``, a custom tool's call, ``#steps``, ``call NAME {...}``), or None when it spells none."""
        if body.startswith("#harmony\n"):
            return self._enc.encode(body[len("#harmony\n") :])
        if body == "#prompt":
            return self._answer("Showing the prompt.", self._enc.decode(prompt))
        search = _SEARCH.fullmatch(body)
        if search:
            query = json.dumps({"query": search.group(1).strip()}, ensure_ascii=False, separators=(",", ":"))
            return self._call("tool_search", query)
        lorem = _LOREM.fullmatch(body)
        if lorem:
            n = int(lorem.group(1))
            filler = self._filler
            # Past max_tokens nothing is streamed: build no more than that (and one to show the cut).
            count = n if max_tokens is None else min(n, max_tokens + 1)
            tokens = [filler[i % len(filler)] for i in range(count)]
            return self._answer(f"Writing {n} tokens.", tokens)
        call_text = _CALL_TEXT.fullmatch(body)
        if call_text and call_text.group(1) in self._custom_tools(prompt):
            return self._call(call_text.group(1), call_text.group(2), custom=True)
        if body.startswith(_STEPS):
            scripted = self._script_step(prompt)
            if scripted is not None:
                return scripted
        return self._act(body)

    def _requested(
        self,
        prompt: Sequence[int],
        max_tokens: int | None,
        constraint: Constraint | None,
        body: str,
        body_tokens: Sequence[int],
    ) -> list[int]:
        """What the request asks for when the body spells no rule: JSON (a JSON final), the call it requires,
        a call of the first function it declares, else the body echoed."""
        if constraint is not None and constraint.final == "json":
            # A token holds a few characters at most: no more is built than overflows max_tokens (cut there).
            room = None if max_tokens is None else 8 * max_tokens + 64
            instance = minimal_instance(constraint.schema or {"type": "object"}, body, room=room)
            return self._answer(
                "Answering in JSON.", json.dumps(instance, ensure_ascii=False, separators=(",", ":"))
            )
        if constraint is not None and constraint.call_required and constraint.calls:
            option = constraint.calls[0]
            if option.recipient == "python":
                return self._python_call(body)
            name = option.recipient.removeprefix("functions.")
            if option.custom:
                return self._call(name, body, custom=True)
            arguments = minimal_instance(option.parameters or {"type": "object"}, body)
            return self._call(name, json.dumps(arguments, ensure_ascii=False, separators=(",", ":")))
        functions = self._declared_functions(prompt)
        if functions:
            name, declaration = functions[0]
            if name in self._custom_tools(prompt):
                return self._call(name, body, custom=True)
            arguments = _arguments_for(declaration, body)
            return self._call(name, json.dumps(arguments, ensure_ascii=False, separators=(",", ":")))
        return self._answer("Echoing the user.", body_tokens)

    # -- the engine ------------------------------------------------------------------------

    async def generate(self, request: GenerationRequest) -> AsyncGenerator[TokenDelta, None]:
        """Stream the planned completion one token per step, honouring max_tokens and stop tokens."""
        request_id = request.request_id
        self._running.add(request_id)
        try:
            # A long prompt's plan (a large last message decoded and copied: 100-300 ms for 1 MB) runs in
            # a thread, so the loop keeps serving others (docs/echo-executor.md#the-echo-executor).
            if len(request.prompt_token_ids) > PLAN_ON_LOOP_TOKENS:
                steps, finish = await asyncio.to_thread(self._steps, request)
            else:
                steps, finish = self._steps(request)
            last = len(steps) - 1
            logprobs = request.sampling.logprobs
            interval = self._interval
            aborted = self._aborted
            started = time.monotonic()
            for step, token in enumerate(steps):
                if interval:
                    delay = started + step * interval - time.monotonic()
                    await asyncio.sleep(max(0, delay))
                else:
                    await _next_step()
                if aborted and request_id in aborted:
                    yield TokenDelta((), "cancelled")
                    return
                if logprobs is None:
                    yield TokenDelta((token,), finish if step == last else None)
                else:
                    yield TokenDelta(
                        (token,), finish if step == last else None, logprobs=(self._logprob(token, logprobs),)
                    )
            if finish is None:
                yield TokenDelta((), "length")
        finally:
            self._running.discard(request_id)
            self._aborted.discard(request_id)

    def _steps(self, request: GenerationRequest) -> tuple[list[int], FinishReason | None]:
        """The tokens ``request`` streams and how they end: at the first stop token (kept), at max_tokens, or
        (None) by running out, when a last, empty delta says "length"."""
        completion = self.plan(request.prompt_token_ids, request.sampling.max_tokens, request.constraint)
        stops = frozenset(request.sampling.stop_token_ids)
        limit = request.sampling.max_tokens
        stop_at = next((i for i, token in enumerate(completion) if token in stops), None)
        if stop_at is not None and stop_at < limit:
            return _cut(completion, stop_at + 1), "stop"
        if len(completion) >= limit:
            return _cut(completion, limit), "length"
        return completion, None

    def _logprob(self, token: int, top: int) -> tuple[float, list[tuple[int, float]]]:
        """Deterministic logprobs: the token -0.5; alternative j (j = 0 is the token itself) is token + j at -0.5 - j."""
        ordinary = len(self._enc.token_bytes) - len(self._enc.special_ids)
        return -0.5, [(token if j == 0 else (token + j) % ordinary, -0.5 - j) for j in range(top)]

    def abort(self, request_id: str) -> None:
        """Stop a running generation at its next step (finish ``cancelled``)."""
        if request_id in self._running:
            self._aborted.add(request_id)
