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

import json
import os
import random
from collections.abc import Iterator, Sequence
from typing import Any, Optional

FAIL = -1
TIMEOUT = -2
ANALYSIS = "<|channel|>analysis<|message|>Thinking.<|end|><|start|>assistant"
MAX_CANDIDATES = 64
SCHEMA_COMMENT = "# JSON schema: "


class GuidedPlan:
    """A plan checked token by token against a compiled structural tag, with seeded insertions."""

    def __init__(
        self,
        matcher: Any,
        plan: list[int],
        *,
        stop_token_ids: Sequence[int],
        rng: Optional[random.Random],
        noise: float,
        special_ids: Sequence[int],
        vocab_size: int,
    ) -> None:
        self._matcher = matcher
        self._plan = plan
        self._stops = set(stop_token_ids)
        self._rng = rng
        self._noise = noise if rng is not None else 0.0
        self._special = list(special_ids)
        self._vocab_size = vocab_size
        self.last_was_inserted = False  # the token just yielded was drawn, not the model's choice
        self._iterator = self.tokens()

    def __iter__(self) -> "GuidedPlan":
        return self

    def __next__(self) -> int:
        return next(self._iterator)

    def _accepts_all(self, tokens: Sequence[int]) -> bool:
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

    def _allowed(self) -> list[int]:
        """The token ids the grammar's mask allows next (``fill_next_token_bitmask``)."""
        import numpy as np
        import xgrammar

        mask = xgrammar.allocate_token_bitmask(1, self._vocab_size)
        self._matcher.fill_next_token_bitmask(mask, 0)
        words = mask[0].numpy().view(np.uint32)
        bits = np.unpackbits(words.view(np.uint8), bitorder="little")
        return [int(i) for i in np.flatnonzero(bits) if i < self._vocab_size]

    def tokens(self) -> Iterator[int]:
        """The tokens to emit, each accepted by the matcher; the plan's last token ends it."""
        for position, token in enumerate(self._plan):
            if self._noise and self._rng is not None and self._rng.random() < self._noise:
                insertion = self._propose()
                if insertion is not None and self._matcher.accept_token(insertion):
                    if self._accepts_all(self._plan[position:]):
                        self.last_was_inserted = True
                        yield insertion
                    else:
                        self._matcher.rollback(1)
            if not self._matcher.accept_token(token):
                raise AssertionError("the plan was checked whole; a token of it cannot be refused now")
            self.last_was_inserted = False
            yield token

    def _propose(self) -> Optional[int]:
        assert self._rng is not None
        allowed = self._allowed()
        if not allowed:
            return None
        allowed_set = set(allowed)
        specials = [t for t in self._special if t in allowed_set and t not in self._stops]
        if specials and self._rng.random() < 0.5:
            return self._rng.choice(specials)
        choice = self._rng.choice(allowed)
        return None if choice in self._stops else choice


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
