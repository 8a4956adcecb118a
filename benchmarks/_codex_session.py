"""Codex-shaped agent sessions for benchmarks: what each turn sends, and the three ways to send it.

A session's turn t adds: on turn 1, Codex's first user messages (AGENTS.md and the environment, the
task); after a ``shell`` call, that call's output (a file's numbered lines, ~2.4k tokens early to
~3.5k late); after a final answer, a new user request; and last, the short user message the echo
executor obeys (docs/echo-executor.md#the-echo-executor): ``call shell {...}``, or ``#lorem 48`` on every
``answer_every``-th turn, a final answer. The model's output items come back exactly as the server
returned them (encrypted reasoning included). Deterministic, so every run sends the same prompts.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

__all__ = ["WAYS", "Session", "is_answer_turn", "request_body"]

WAYS = ("replay", "previous_response_id", "websocket")
ANSWER_TOKENS = 48

_GUIDELINES = (
    "Read the relevant files before you change them, and keep every change as small as the task allows.",
    "Prefer the repository's own conventions over your habits; match its naming, layout and test style.",
    "Run the tests that cover what you changed, and say which ones you ran and what they printed.",
    "Never discard a user's uncommitted work; ask before any destructive command.",
    "Use apply_patch for edits; do not write files with shell redirections or heredocs.",
    "When a command fails, read its output, find the cause, and fix that rather than retrying blindly.",
    "Keep the plan current with update_plan when a task has several steps.",
    "Answer concisely: what changed, where, and what remains, with file paths and line numbers.",
)
INSTRUCTIONS = "You are Codex, a coding agent running in a terminal on the user's machine.\n\n" + "\n".join(
    f"{i + 1}. {_GUIDELINES[i % len(_GUIDELINES)]} (rule {i + 1})" for i in range(64)
)

TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "name": "shell",
        "description": "Runs a shell command and returns its output.",
        "strict": False,
        "parameters": {
            "type": "object",
            "properties": {
                "command": {"type": "array", "items": {"type": "string"}, "description": "The command"},
                "workdir": {"type": "string", "description": "The working directory"},
                "timeout_ms": {"type": "number", "description": "Timeout in milliseconds"},
            },
            "required": ["command"],
            "additionalProperties": False,
        },
    },
    {
        "type": "function",
        "name": "apply_patch",
        "description": "Edit files with a patch in the apply_patch format (Begin Patch ... End Patch).",
        "strict": False,
        "parameters": {
            "type": "object",
            "properties": {"input": {"type": "string", "description": "The whole patch"}},
            "required": ["input"],
            "additionalProperties": False,
        },
    },
    {
        "type": "function",
        "name": "update_plan",
        "description": "Updates the task plan: steps and their status.",
        "strict": False,
        "parameters": {
            "type": "object",
            "properties": {
                "explanation": {"type": "string"},
                "plan": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "step": {"type": "string"},
                            "status": {"type": "string", "enum": ["pending", "in_progress", "completed"]},
                        },
                        "required": ["step", "status"],
                        "additionalProperties": False,
                    },
                },
            },
            "required": ["plan"],
            "additionalProperties": False,
        },
    },
    {
        "type": "function",
        "name": "view_image",
        "description": "Attach a local image to the conversation.",
        "strict": False,
        "parameters": {
            "type": "object",
            "properties": {"path": {"type": "string", "description": "Path of the image"}},
            "required": ["path"],
            "additionalProperties": False,
        },
    },
]

_CODE = (
    "class Tokenizer{n}:",
    '    """Split source text into tokens for the parser (module {n})."""',
    "    def __init__(self, source: str, *, keep_space: bool = False) -> None:",
    "        self.source = source",
    "        self.position = 0",
    "        self.keep_space = keep_space",
    "    def next_token(self) -> Token | None:",
    "        while self.position < len(self.source) and self.source[self.position].isspace():",
    "            self.position += 1",
    "        if self.position >= len(self.source):",
    "            return None",
    "        start = self.position",
    "        kind = classify(self.source[start])",
    "        self.position = scan(self.source, start, kind)",
    "        return Token(kind, self.source[start : self.position], start)",
    "",
    "def parse_{n}(tokens: list[Token]) -> list[Node]:",
    "    return [node for node in build(tokens) if node.kind != 'space']  # issue {n}",
)
_CHARS_PER_TOKEN = 3.7  # of the numbered code lines above (o200k_harmony), measured


def user_message(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def environment_context(session: int) -> str:
    """Codex's first user message: the repository's AGENTS.md and the environment (~700 tokens)."""
    agents = "\n".join(f"- {_GUIDELINES[i % len(_GUIDELINES)]}" for i in range(24))
    return (
        f"# AGENTS.md instructions for /work/proj-{session}\n\n<INSTRUCTIONS>\n{agents}\n</INSTRUCTIONS>\n"
        f"<environment_context>\n  <cwd>/work/proj-{session}</cwd>\n  <approval_policy>on-request"
        "</approval_policy>\n  <sandbox_mode>workspace-write</sandbox_mode>\n  <network_access>restricted"
        "</network_access>\n  <shell>bash</shell>\n</environment_context>"
    )


def task(session: int, number: int) -> str:
    """A user's request: the session's first, or the next one after an answer."""
    return (
        f"Task {number} in project {session}: the tokenizer keeps whitespace tokens that the parser then "
        "trips over. Make parse() skip them, keep the public API unchanged, add a regression test next to "
        "the existing ones and run the test suite before you report back."
    )


def output_tokens_target(session: int, turn: int) -> int:
    """How many tokens this turn's tool output has: ~2.4k early to ~3.5k late (later turns read more), plus
    0-200 varying by session and turn, so the prompt reaches ~85k tokens by turn 30 and ~120k by turn 40."""
    return 2300 + 30 * turn + ((session * 7 + turn * 13) % 5) * 50


def command_output(session: int, turn: int) -> str:
    """What ``shell`` printed: a file's lines, numbered (``sed -n``-like), of ~output_tokens_target tokens."""
    chars = int(output_tokens_target(session, turn) * _CHARS_PER_TOKEN)
    lines = ["Exit code: 0", "Wall time: 0.1 seconds", "Output:"]
    size = 0
    number = 0
    while size < chars:
        line = f"{number + 1:6}\t" + _CODE[number % len(_CODE)].format(n=f"{session}_{turn}")
        lines.append(line)
        size += len(line) + 1
        number += 1
    return "\n".join(lines)


def is_answer_turn(turn: int, answer_every: int) -> bool:
    return answer_every > 0 and turn % answer_every == 0


def steering(session: int, turn: int, answer_every: int) -> str:
    """The user message the echo executor obeys: a ``shell`` call, or a short final answer."""
    if is_answer_turn(turn, answer_every):
        return f"#lorem {ANSWER_TOKENS}"
    arguments = {
        "command": ["bash", "-lc", f"sed -n 1,400p src/agent/module_{turn}.py"],
        "workdir": f"/work/proj-{session}",
        "timeout_ms": 10000,
    }
    return "call shell " + json.dumps(arguments, separators=(",", ":"))


@dataclass
class Session:
    """One agent session's conversation, as its client keeps it."""

    index: int
    key: str
    answer_every: int
    history: list[dict[str, Any]] = field(default_factory=list)  # every item, for replay
    new: list[dict[str, Any]] = field(default_factory=list)  # this turn's items (continuations)
    previous_id: str | None = None
    last_output: list[dict[str, Any]] = field(default_factory=list)
    tasks: int = 0

    def begin_turn(self, turn: int) -> None:
        """Add this turn's input: the last call's output, a new request after an answer, the steering."""
        items: list[dict[str, Any]] = []
        if turn == 1:
            self.tasks = 1
            items += [user_message(environment_context(self.index)), user_message(task(self.index, 1))]
        for item in self.last_output:
            if item["type"] == "function_call":
                output = command_output(self.index, turn)
                items.append({"type": "function_call_output", "call_id": item["call_id"], "output": output})
        if turn > 1 and is_answer_turn(turn - 1, self.answer_every):
            self.tasks += 1
            items.append(user_message(task(self.index, self.tasks)))
        items.append(user_message(steering(self.index, turn, self.answer_every)))
        self.history += items
        self.new = items

    def first_turn_like(self, turn: int) -> None:
        """Start this (fresh) session with what turn ``turn`` of a session brings new: a tool output of that
        turn's size (as a user message: there is no call to answer yet) and the steering message. Its cost
        against turn ``turn``'s is what the history adds (the benchmark's "turn 1, turn 40's new input")."""
        self.history = [
            user_message(command_output(self.index, turn)),
            user_message(steering(self.index, turn, 0)),
        ]
        self.new = list(self.history)
        self.previous_id = None
        self.last_output = []

    def end_turn(self, response_id: str, output: list[dict[str, Any]]) -> None:
        """Keep the model's output items exactly as the server returned them."""
        self.previous_id = response_id
        self.last_output = output
        self.history += output


def request_body(way: str, session: Session) -> dict[str, Any]:
    """The create body (or WebSocket ``response.create``) of ``session``'s current turn."""
    body: dict[str, Any] = {
        "model": "gpt-oss",
        "instructions": INSTRUCTIONS,
        "tools": TOOLS,
        "tool_choice": "auto",
        "parallel_tool_calls": False,
        "reasoning": {"effort": "medium", "summary": "auto"},
        "include": ["reasoning.encrypted_content"],
        "prompt_cache_key": session.key,
    }
    if way == "replay":
        return {**body, "input": session.history, "store": False, "stream": True}
    continued = {"previous_response_id": session.previous_id} if session.previous_id else {}
    if way == "previous_response_id":
        return {**body, "input": session.new, "store": True, "stream": True, **continued}
    return {"type": "response.create", **body, "input": session.new, "store": False, **continued}
