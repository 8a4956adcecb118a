"""Fixtures of the constraints tests: xgrammar's compiler as TensorRT-LLM builds it for gpt-oss."""

from __future__ import annotations

from typing import Any

import pytest


@pytest.fixture(scope="module")
def compiler() -> Any:
    """The compiler TensorRT-LLM's XGrammarMatcherFactory builds for gpt-oss (one definition: the fake's)."""
    from support.trtllm_harness import fake_trtllm_importable

    with fake_trtllm_importable():
        from tensorrt_llm._torch.pyexecutor.grammar_matcher import XGrammarMatcherFactory

        return XGrammarMatcherFactory()._xgrammar_compiler
