"""Control tokens spelled in ordinary tokens, read as the control tokens: a constrained completion at the grammar's level.

TensorRT-LLM hands xgrammar gpt-oss's vocabulary as ``get_vocab()`` strings, so to xgrammar a control
token such as ``<|message|>`` is seven characters, and every literal of a structural tag can be written
either as the special token or spelled in ordinary tokens (``<``, ``|``, ``message``, ``|``, ``>``).
No free text of a constraint holds ``<|`` (``constraints/``: free bodies, JSON strings, Lark and regex
classes), so under a constraint a spelled ``<|name|>`` can only be a literal of the grammar: this stage,
applied by an executor to what it generated under one (never to free generation), gives the reader the
control token instead. Token boundaries need not match the control token's: an ordinary token holding
text on both sides of one (``"}<``) is split into single-byte tokens around it (every byte is a token of
o200k), so the bytes the reader sees are the model's, in order.

Per step the common case (no pending bytes, no ``<`` in the step's tokens) returns the step unchanged;
only a step holding ``<`` is scanned, and bytes that may still become a control token (``<|cha``) wait
for the next step (:meth:`SpelledControlTokens.flush` gives them back as they are at the end).

Logprobs follow their tokens: a spelled control token gets the sum of its pieces' logprobs and its
first piece's alternatives; the pieces of a split token, its own entry on the first and ``(0.0, ())``
on the rest.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence

from .encoding import HarmonyEncoding

__all__ = ["SpelledControlTokens"]

_Tables = tuple[dict[bytes, int], frozenset[bytes], dict[int, int]]

Logprob = tuple[float, Sequence[tuple[int, float]]]
_NO_LOGPROB: Logprob = (0.0, ())
_SPELLED = re.compile(rb"<\|[A-Za-z0-9_]+\|>")


@functools.lru_cache(maxsize=4)
def _tables(encoding: HarmonyEncoding) -> _Tables:
    """Per encoding, once (a tenth of a second): control tokens by text, their proper prefixes, a token per byte."""
    specials = encoding.special_ids
    by_text = {encoding.token_bytes[i]: i for i in specials if _SPELLED.fullmatch(encoding.token_bytes[i])}
    prefixes = frozenset(text[:k] for text in by_text for k in range(1, len(text)))
    byte_token: dict[int, int] = {}
    for token, data in enumerate(encoding.token_bytes):
        if len(data) == 1 and token not in specials:
            byte_token.setdefault(data[0], token)
    if len(byte_token) != 256:
        raise ValueError("the vocabulary lacks a single-byte token for some byte")
    return by_text, prefixes, byte_token


class SpelledControlTokens:
    """Reads a constrained generation's steps, spelled control tokens become the special tokens (module docstring)."""

    __slots__ = (
        "_bytes",
        "_specials",
        "_by_text",
        "_prefixes",
        "_byte_token",
        "_longest",
        "_pending",
        "spelled",
    )

    def __init__(self, encoding: HarmonyEncoding) -> None:
        tables = _tables(encoding)
        self._bytes = encoding.token_bytes
        self._specials = encoding.special_ids
        self._by_text, self._prefixes, self._byte_token = tables
        self._longest = max(map(len, self._by_text))
        #: Tokens held back (id, or None for loose bytes; their bytes; their logprob entry).
        self._pending: list[tuple[int | None, bytes, Logprob | None]] = []
        #: How many spelled control tokens were read as control tokens (for logs and tests).
        self.spelled = 0

    def read(
        self, tokens: Sequence[int], logprobs: Sequence[Logprob] | None = None, last: bool = False
    ) -> tuple[Sequence[int], Sequence[Logprob] | None]:
        """One step's tokens (and logprobs, one entry per token), spelled control tokens read as themselves.

        ``last``: the generation ends with this step; nothing is held back.
        """
        if not self._pending:
            token_bytes = self._bytes
            specials = self._specials
            for token in tokens:
                if token not in specials and b"<" in token_bytes[token]:
                    break
            else:
                return tokens, logprobs  # the common step: nothing spelled, nothing held
        out: list[int] = []
        out_lp: list[Logprob] | None = None if logprobs is None else []
        for index, token in enumerate(tokens):
            entry = logprobs[index] if logprobs is not None else None
            if token in self._specials:  # a real control token ends whatever was being spelled
                self._emit_pending(out, out_lp, final=True)
                out.append(token)
                if out_lp is not None:
                    out_lp.append(entry or _NO_LOGPROB)
            else:
                self._pending.append((token, self._bytes[token], entry))
        self._emit_pending(out, out_lp, final=last)
        return out, out_lp

    def _emit_pending(self, out: list[int], out_lp: list[Logprob] | None, final: bool) -> None:
        """Move what is read of the pending tokens to ``out``; keep back what may still become a control token."""
        pending = self._pending
        if not pending:
            return
        data = b"".join([piece for _, piece, _ in pending])
        hold = len(data)
        if not final:
            start = max(0, len(data) - self._longest)
            lt = data.find(b"<", start)
            while lt != -1:
                if data[lt:] in self._prefixes:
                    hold = lt
                    break
                lt = data.find(b"<", lt + 1)
        position = 0
        for match in _SPELLED.finditer(data, 0, hold):
            special = self._by_text.get(match.group())
            if special is None:
                continue
            self._emit_bytes(out, out_lp, position, match.start())
            spelled = self._take(match.end() - match.start())
            self.spelled += 1
            out.append(special)
            if out_lp is not None:
                entries = [entry for _, _, entry in spelled if entry is not None]
                out_lp.append((sum(e[0] for e in entries), entries[0][1]) if entries else _NO_LOGPROB)
            position = match.end()
        self._emit_bytes(out, out_lp, position, hold)

    def _emit_bytes(self, out: list[int], out_lp: list[Logprob] | None, start: int, end: int) -> None:
        """The next ``end - start`` pending bytes as tokens: whole tokens as they were, parts byte by byte."""
        for token, piece, entry in self._take(end - start):
            if token is not None:
                out.append(token)
                if out_lp is not None:
                    out_lp.append(entry or _NO_LOGPROB)
                continue
            for i, byte in enumerate(piece):
                out.append(self._byte_token[byte])
                if out_lp is not None:
                    out_lp.append((entry or _NO_LOGPROB) if i == 0 else _NO_LOGPROB)

    def _take(self, count: int) -> list[tuple[int | None, bytes, Logprob | None]]:
        """The first ``count`` pending bytes, as pending entries; a token cut in two leaves its rest pending."""
        taken: list[tuple[int | None, bytes, Logprob | None]] = []
        pending = self._pending
        while count > 0 and pending:
            token, piece, entry = pending[0]
            if len(piece) <= count:
                pending.pop(0)
                taken.append((token, piece, entry))
                count -= len(piece)
            else:
                taken.append((None, piece[:count], entry))
                pending[0] = (None, piece[count:], None)
                count = 0
        return taken
