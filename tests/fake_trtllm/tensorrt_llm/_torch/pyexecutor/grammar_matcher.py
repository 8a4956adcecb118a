"""tensorrt_llm/_torch/pyexecutor/grammar_matcher.py, run for real on CPU: xgrammar as TensorRT-LLM sets it up.

``XGrammarMatcherFactory`` builds ``xgrammar.TokenizerInfo(encoded_vocab, vocab_type,
vocab_size=vocab_size_padded, stop_token_ids=..., add_prefix_space=...)`` and one
``GrammarCompiler(tokenizer_info, cache_enabled=True)``; ``create`` compiles a structural tag
with ``compile_structural_tag(guide)`` and wraps ``xgrammar.GrammarMatcher(compiled,
max_rollback_tokens=max_num_draft_tokens)``.

The inputs are what TensorRT-LLM derives for gpt-oss's Hugging Face tokenizer
(``_xgrammar_tokenizer_info`` in ``llmapi/tokenizer.py``, ``GuidedDecodingConfig``):

- ``encoded_vocab``: ``tokenizer.get_vocab()`` sorted by id: byte-level BPE strings (each byte
  through GPT-2's byte-to-unicode table) and the special tokens as their literal text
  (``<|end|>``, ``<|reserved_200013|>`` …): xgrammar sees them as ordinary text;
- ``vocab_type``: ``_detect_metadata_from_hf`` reads BYTE_LEVEL from gpt-oss's ByteLevel decoder,
  ``add_prefix_space`` False;
- ``stop_token_ids``: ``[tokenizer.eos_token_id]``, gpt-oss's ``<|return|>``;
- ``vocab_size_padded``: the model's ``config.json`` ``vocab_size``, 201088.

The o200k vocabulary comes from trtllm-responses' offline Harmony encoding (the same ids and
bytes as gpt-oss's tokenizer). Building the tokenizer info costs seconds, so it is made once per
process (TensorRT-LLM makes one per executor).
"""

from __future__ import annotations

import functools
from typing import Any

GPT_OSS_VOCAB_SIZE = 201088  # config.json vocab_size: the padded vocabulary TensorRT-LLM passes


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte-level table, as Hugging Face's ByteLevel pre-tokenizer writes vocab strings."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
    printable += list(range(ord("®"), ord("ÿ") + 1))
    chars = printable[:]
    n = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + n)
            n += 1
    return dict(zip(printable, map(chr, chars)))


def gpt_oss_encoded_vocab(encoding: Any) -> list[str]:
    """gpt-oss's ``get_vocab()`` sorted by id, as TensorRT-LLM hands it to xgrammar."""
    table = _bytes_to_unicode()
    return [
        raw.decode() if i in encoding.special_ids else "".join(table[b] for b in raw)
        for i, raw in enumerate(encoding.token_bytes[:GPT_OSS_VOCAB_SIZE])
    ]


@functools.lru_cache(maxsize=1)
def _shared_compiler() -> tuple[Any, Any]:
    import xgrammar

    from trtllm_responses.harmony import load_encoding

    encoding = load_encoding()
    tokenizer_info = xgrammar.TokenizerInfo(
        gpt_oss_encoded_vocab(encoding),
        vocab_type=xgrammar.VocabType.BYTE_LEVEL,
        vocab_size=GPT_OSS_VOCAB_SIZE,
        stop_token_ids=[encoding.return_],
        add_prefix_space=False,
    )
    return tokenizer_info, xgrammar.GrammarCompiler(tokenizer_info, cache_enabled=True)


class XGrammarMatcher:
    """TensorRT-LLM's XGrammarMatcher: a thin wrapper of ``xgrammar.GrammarMatcher``."""

    def __init__(self, matcher: Any) -> None:
        self._matcher = matcher

    def accept_token(self, token_id: int) -> bool:
        return self._matcher.accept_token(token_id)

    def rollback(self, num_tokens: int) -> None:
        self._matcher.rollback(num_tokens)

    def fill_next_token_bitmask(self, next_token_bitmask: Any, index: int) -> None:
        self._matcher.fill_next_token_bitmask(next_token_bitmask, index)

    def is_terminated(self) -> bool:
        return self._matcher.is_terminated()


class XGrammarMatcherFactory:
    """Compiles a request's guide with the gpt-oss tokenizer info; ``create`` takes the structural tag."""

    def __init__(self, max_num_draft_tokens: int = 0) -> None:
        self.tokenizer_info, self._xgrammar_compiler = _shared_compiler()
        self.max_num_draft_tokens = max_num_draft_tokens

    def compile_structural_tag(self, guide: str) -> Any:
        return self._xgrammar_compiler.compile_structural_tag(guide)

    def create(self, structural_tag: str, *, max_rollback_tokens: int | None = None) -> XGrammarMatcher:
        import xgrammar

        compiled = self.compile_structural_tag(structural_tag)
        # TensorRT-LLM: max_rollback_tokens=max_num_draft_tokens. The fake's sampler rolls back whole
        # lookaheads (-1: unlimited); what is accepted is the same either way.
        rollback = self.max_num_draft_tokens if max_rollback_tokens is None else max_rollback_tokens
        return XGrammarMatcher(xgrammar.GrammarMatcher(compiled, max_rollback_tokens=rollback))
