"""The fake's "model" (no TensorRT-LLM counterpart): what it wants to write, and sampling under a grammar.

What it wants to write (its plan) is the echo executor's deterministic Harmony completion for the
prompt. Test hooks: a last user message ``#fail`` makes the engine fail the request after one
token (an error response: ``RequestError`` while iterating), ``#timeout`` ends it with 'timeout'.

Under guided decoding the request's structural tag is compiled and matched with xgrammar as
TensorRT-LLM does (``_torch/pyexecutor/grammar_matcher.py``), and every token goes through the
matcher: a token the grammar refuses is never emitted. The plan is the first of these the grammar
accepts whole: the echo plan, then completions read off the tag itself (each alternative's
``begin``, the minimal instance of a ``json_schema``, ``x`` for free text, an analysis message
where a grammar allows one). Sampled decoding (not greedy, see ``SamplingParams._greedy_decoding``)
with ``FAKE_TRTLLM_NOISE`` > 0 inserts, at that rate per step, a seeded random token the grammar's
mask allows (half the time a special token, when any is allowed), kept only when the rest of the
plan is still accepted after it: the output explores what the constraint lets through and still
finishes. Greedy decoding follows the plan exactly.
"""

from __future__ import annotations

import functools
import json
import os
import random
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Optional

FAIL = -1
TIMEOUT = -2
ANALYSIS = "<|channel|>analysis<|message|>Thinking.<|end|><|start|>assistant"
MAX_CANDIDATES = 64
#: Candidates re-planned from character by character (each costs an encoding per character).
MAX_TEXT_CANDIDATES = 8
#: The adversary's draws: gpt-oss's named control tokens (200000-200018), reserved ones sampled per draw,
#: random tokens tried before the mask is filled.
NAMED_SPECIALS = 19
RESERVED_SAMPLE = 8
REJECTION_TRIES = 64
SCHEMA_COMMENT = "# JSON schema: "


class GuidedSampler:
    """The model under a grammar, sampled as an adversary: anything the full mask allows may come out.

    Each step either draws from the mask (rate ``noise``; module docstring: special tokens, stop tokens
    included, tokens holding ``<`` that begin a spelled control token, or any allowed token) or takes the
    model's choice: the next token of its plan, a control token of it spelled in ordinary tokens at the
    same rate when the grammar allows that. Nothing emitted is taken back: after a draw the plan no
    longer fits, the model re-plans from where the text now is (the rest of a candidate completion,
    by tokens, then by characters) and gives up (the request ends at its token budget) only when none
    fits. A stop token ends the request as the engine ends it.
    """

    def __init__(
        self,
        matcher: Any,
        plan: list[int],
        *,
        candidates: Sequence[list[int]],
        encoding: Any,
        stop_token_ids: Sequence[int],
        end_id: int,
        rng: Optional[random.Random],
        noise: float,
        vocab_size: int,
        on_end: Optional[Callable[[dict[str, Any]], None]] = None,
    ) -> None:
        self._matcher = matcher
        self._plan = list(plan)
        self._at = 0
        self._candidates = [list(plan)] + [list(c) for c in candidates if c != plan]
        self._enc = encoding
        self._stops = set(stop_token_ids)
        self._end_id = end_id
        self._rng = rng
        self._noise = noise if rng is not None else 0.0
        self._vocab_size = vocab_size
        self._on_end = on_end
        self.last_was_inserted = False  # the token just yielded was drawn, not the model's choice
        self.counts = {"drawn": 0, "spelled": 0, "replanned": 0, "gave_up": 0}
        self._text_suffixes: Optional[list[list[int]]] = None
        self._iterator = self.tokens()

    def __iter__(self) -> "GuidedSampler":
        return self

    def __next__(self) -> int:
        return next(self._iterator)

    def tokens(self) -> Iterator[int]:
        """The tokens the engine samples, each allowed by the mask when drawn; ends at a stop token."""
        emitted: list[int] = []
        began = time.perf_counter()
        try:
            while not self._matcher.is_terminated():
                inserted = False
                token: Optional[int] = None
                if self._noise and self._rng is not None and self._rng.random() < self._noise:
                    token = self._draw()
                    inserted = token is not None
                if token is None:
                    token = self._planned()
                if token is None:
                    self.counts["gave_up"] += 1
                    return  # no completion the model knows fits: it wanders to its token budget
                if not self._matcher.accept_token(token):
                    raise AssertionError("a token the mask allowed was refused")
                self.counts["drawn"] += inserted
                self.last_was_inserted = inserted
                emitted.append(token)
                yield token
                if token in self._stops:
                    return
        finally:
            if self._on_end is not None:
                seconds = round(time.perf_counter() - began, 3)
                self._on_end({"text": self._enc.decode(emitted), "seconds": seconds, **self.counts})

    def force(self, tokens: Sequence[int]) -> None:
        """Advance the grammar over ``tokens`` written elsewhere (a context phase's first token): the plan goes on
        after them where it starts with them, else the model re-plans from there. A token the grammar refuses is
        a ValueError."""
        for token in tokens:
            if not self._matcher.accept_token(token):
                raise ValueError(f"token {token} is not allowed by the request's grammar here")
        if self._plan[: len(tokens)] == list(tokens):
            self._at = len(tokens)
        else:
            self._plan, self._at = [], 0

    def _allowed(self) -> Any:
        """The token ids the grammar's mask allows next (``fill_next_token_bitmask``), as a numpy array."""
        import numpy as np
        import xgrammar

        mask = xgrammar.allocate_token_bitmask(1, self._vocab_size)
        self._matcher.fill_next_token_bitmask(mask, 0)
        bits = np.unpackbits(mask[0].numpy().view(np.uint8), bitorder="little")
        allowed = np.flatnonzero(bits)
        return allowed[allowed < self._vocab_size]

    def _draw(self) -> Optional[int]:
        """A token from the full mask: a special or stop token, a token holding ``<``, or any allowed token.

        Drawn by rejection (a random token of the kind, kept if the matcher accepts it: uniform over the
        allowed ones), the mask filled only when that finds none: xgrammar fills gpt-oss's 201,088-token mask
        in tens of milliseconds where a grammar leaves much free, an accept costs microseconds.
        """
        assert self._rng is not None
        rng = self._rng
        kind = rng.random()
        if kind < 1 / 3:  # the named control tokens (stop tokens among them) and a few reserved ones
            first = _first_special(self._enc)
            pool = list(range(first, first + NAMED_SPECIALS))
            pool += rng.sample(range(first + NAMED_SPECIALS, len(self._enc.token_bytes)), RESERVED_SAMPLE)
            allowed = [t for t in pool if self._accepts([t])]
            if allowed:
                return rng.choice(allowed)
        elif kind < 2 / 3:  # a token holding "<": where a spelled control token may begin
            holding = _lt_tokens(self._enc)
            for _ in range(REJECTION_TRIES):
                token = int(holding[rng.randrange(len(holding))])
                if self._accepts([token]):
                    return token
        for _ in range(REJECTION_TRIES):
            token = rng.randrange(len(self._enc.token_bytes))
            if self._accepts([token]):
                return token
        allowed_ids = self._allowed()
        return int(allowed_ids[rng.randrange(len(allowed_ids))]) if len(allowed_ids) else None

    def _accepts(self, tokens: Sequence[int]) -> bool:
        accepted = 0
        ok = True
        for token in tokens:
            if not self._matcher.accept_token(token):
                ok = False
                break
            accepted += 1
        if accepted:
            self._matcher.rollback(accepted)
        return ok

    def _planned(self) -> Optional[int]:
        """The model's choice: its plan's next token (perhaps spelled), else the first token of a new plan."""
        if self._at < len(self._plan):
            token = self._plan[self._at]
            if self._noise and self._rng is not None and token in self._enc.special_ids:
                if self._rng.random() < self._noise:
                    spelled = self._enc.encode_plain(self._enc.decode([token]))
                    if self._accepts(spelled[:1]):
                        self.counts["spelled"] += 1
                        self._plan[self._at : self._at + 1] = spelled
                        token = spelled[0]
            if self._accepts([token]):
                self._at += 1
                return token
        plan = self._replan()
        if plan is None or not plan:
            return None
        self.counts["replanned"] += 1
        self._plan, self._at = plan, 1
        return plan[0]

    def _complete(self, tokens: list[int]) -> Optional[list[int]]:
        """``tokens`` if the grammar accepts them and they end it (a stop token, or ``end_id`` appended)."""
        if tokens and tokens[-1] in self._stops:
            return tokens if self._accepts(tokens) else None
        whole = tokens + [self._end_id]
        return whole if self._accepts(whole) else None

    def _replan(self) -> Optional[list[int]]:
        """What the model writes next once its plan no longer fits: the text the grammar forces (xgrammar's
        jump-forward string), else the rest of a candidate completion that fits (by tokens, then by
        characters), else one short allowed token (a step of a wandering model)."""
        inner = getattr(self._matcher, "_matcher", self._matcher)  # the model may read the xgrammar matcher
        forced = self._enc.encode(inner.find_jump_forward_string())
        if forced and self._accepts(forced):
            return forced
        for suffix in self._suffixes():
            if suffix and not self._accepts(suffix[:1]):
                continue
            plan = self._complete(suffix)
            if plan is not None:
                return plan
        allowed = self._allowed()
        short = allowed[_single_byte(self._enc)[allowed]]
        pool = short if len(short) else allowed
        if self._rng is None or not len(pool):
            return None
        return [int(pool[self._rng.randrange(len(pool))])]

    def _suffixes(self) -> Iterator[list[int]]:
        """The rests of the candidate completions: by tokens, then (the first few) by characters, encoded once."""
        for candidate in self._candidates:
            body = candidate[:-1] if candidate and candidate[-1] == self._end_id else candidate
            for k in range(len(body) + 1):
                yield body[k:]
        if self._text_suffixes is None:
            self._text_suffixes = []
            for candidate in self._candidates[:MAX_TEXT_CANDIDATES]:
                text = self._enc.decode([t for t in candidate if t != self._end_id])
                self._text_suffixes += [self._enc.encode(text[j:]) for j in range(1, len(text))]
        yield from self._text_suffixes


@functools.lru_cache(maxsize=2)
def _lt_tokens(encoding: Any) -> list[int]:
    """The ordinary tokens whose bytes hold ``<`` (a spelled control token may begin there)."""
    return [t for t, data in enumerate(encoding.token_bytes[: _first_special(encoding)]) if b"<" in data]


@functools.lru_cache(maxsize=2)
def _single_byte(encoding: Any) -> Any:
    """Per token id, whether it is an ordinary token of one byte."""
    import numpy as np

    flags = np.zeros(max(len(encoding.token_bytes), 1 << 18), dtype=bool)
    for token, data in enumerate(encoding.token_bytes[: _first_special(encoding)]):
        flags[token] = len(data) == 1
    return flags


def _first_special(encoding: Any) -> int:
    return min(encoding.special_ids)


def tag_completions(fmt: dict[str, Any], text: str = "fake") -> list[str]:
    """Texts a structural-tag format accepts, read off the format (not complete for grammars and regexes)."""
    from trtllm_responses.harmony.schema import minimal_instance

    kind = fmt.get("type")
    if kind == "const_string":
        return [fmt["value"]]
    if kind == "json_schema":
        schema = fmt.get("json_schema")
        schema = json.loads(schema) if isinstance(schema, str) else schema
        return [json.dumps(minimal_instance(schema or {"type": "object"}, text), separators=(",", ":"))]
    if kind == "any_text":
        return ["x"]
    if kind == "grammar":
        grammar = fmt.get("grammar", "")
        if grammar.startswith(SCHEMA_COMMENT):  # trtllm-responses' JSON grammars say their schema
            schema = json.loads(grammar[len(SCHEMA_COMMENT) :].partition("\n")[0])
            return tag_completions({"type": "json_schema", "json_schema": schema}, text)
        return ["", ANALYSIS]
    if kind == "regex":
        return []
    if kind == "tag":
        return [fmt["begin"] + body + fmt.get("end", "") for body in tag_completions(fmt["content"], text)]
    if kind == "or":
        out: list[str] = []
        for element in fmt["elements"]:
            out += tag_completions(element, text)
        return out[:MAX_CANDIDATES]
    if kind == "sequence":
        texts = [""]
        for element in fmt["elements"]:
            texts = [a + b for a in texts for b in tag_completions(element, text)][:MAX_CANDIDATES]
        return texts
    if kind == "structural_tag":
        return tag_completions(fmt["format"], text)
    return []


def choose_plan(
    matcher: Any,
    candidates: Sequence[list[int]],
    stop_token_ids: Sequence[int],
    end_id: int,
    rng: Optional[random.Random] = None,
    noise: float = 0.0,
) -> Optional[list[int]]:
    """A candidate the grammar accepts whole, ending at a stop token (``<|return|>`` appended where the
    grammar may end): the first (greedy), or with probability ``noise`` a seeded pick among them."""
    stops = set(stop_token_ids)
    accepted_plans: list[list[int]] = []
    for tokens in candidates:
        body = [t for t in tokens if t != end_id] if tokens and tokens[-1] == end_id else list(tokens)
        accepted = 0
        ok = True
        for token in body:
            if not matcher.accept_token(token):
                ok = False
                break
            accepted += 1
        terminal = ok and bool(body) and body[-1] in stops
        can_end = ok and not terminal and matcher.accept_token(end_id)
        if can_end:
            accepted += 1
        if accepted:
            matcher.rollback(accepted)
        if terminal:
            accepted_plans.append(body)
        elif can_end:
            accepted_plans.append(body + [end_id])
        if accepted_plans and (rng is None or not noise):
            break
    if not accepted_plans:
        return None
    if rng is not None and noise and rng.random() < noise:
        return rng.choice(accepted_plans)
    return accepted_plans[0]


def noise_rate() -> float:
    return float(os.environ.get("FAKE_TRTLLM_NOISE", "0") or 0)
