"""tensorrt_llm/_torch/pyexecutor/py_executor_creator.py, faked: the guided-decoder stage of ``create_py_executor``.

As there, per release (``_release.guides_one_model_drafting``): with a guided decoding backend and speculative
decoding, before NVIDIA/TensorRT-LLM PR #6948 a config without a dedicated drafter (one-model Eagle3, MTP) raises
``ValueError`` (the creator's ``if spec_config is not None and not has_spec_drafter: raise ValueError(...)``, the
version the public index holds; issue #7006); from it one-model modes get a ``CapturableGuidedDecoder``
(``spec_dec_mode.support_capturable_guided_decoder()``) and two-model ones a ``GuidedDecoder`` (PR #6300). The fake
builds no decoder object: the grammar matcher is made per request (``grammar_matcher.py``).
"""

from __future__ import annotations

from typing import Any

from ..._release import guides_one_model_drafting

#: The creator's words before PR #6948.
ONE_MODEL_GUIDED = "Guided decoding is only supported with speculative decoding that has a dedicated drafter (two-model engine)."


def create_guided_decoder(args: Any) -> None:
    """Refuse, as the release's creator does, guided decoding with speculative decoding it cannot constrain."""
    spec = args.speculative_config
    if args.guided_decoding_backend is None or spec is None or not spec.one_model():
        return
    if not guides_one_model_drafting():
        raise ValueError(ONE_MODEL_GUIDED)
