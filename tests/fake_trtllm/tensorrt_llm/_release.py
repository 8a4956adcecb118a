"""Which TensorRT-LLM release the fake plays, and what that release does differently (no TensorRT-LLM counterpart).

The version is ``tensorrt_llm.__version__`` (``FAKE_TRTLLM_VERSION`` in the environment, default ``1.2.0``),
read each time it is asked, so a test may monkeypatch it. This parser is the fake's own, not the server's
(``trtllm_responses/executors/trtllm_releases.py``): a fake that asked the server's code what TensorRT-LLM
does would only agree with it. Each difference names its source (tests/fake_trtllm/README.md has the table).
"""

from __future__ import annotations

import re

#: SamplingParams fields the PyTorch sampler (TorchSampler) ignored before 1.3.0rc29 and applies from there:
#: PR #16485 (penalties), PR #16590 (min_p), PR #17172 (per-request seed), merged on main July-August 2026;
#: issue #9442 (1.1, 1.2: "Repetition, Frequency, and Presence Penalty Not Applied").
SAMPLER_FIELDS = ("seed", "min_p", "frequency_penalty", "presence_penalty")


def version() -> str:
    import tensorrt_llm

    return str(tensorrt_llm.__version__)


def _key(text: str) -> tuple[int, int, int, int]:
    match = re.match(r"(\d+)\.(\d+)\.(\d+)(?:rc(\d+))?", text)
    if match is None:
        raise ValueError(f"the fake cannot play TensorRT-LLM {text!r}")
    major, minor, patch, rc = match.groups()
    return int(major), int(minor), int(patch), int(rc) if rc is not None else 1 << 30


def at_least(text: str) -> bool:
    """Whether the release played is ``text`` or newer (``1.3.0rc29`` < ``1.3.0``)."""
    return _key(version()) >= _key(text)


def sampler_applies(name: str) -> bool:
    """Whether the PyTorch sampler applies SamplingParams field ``name`` (see SAMPLER_FIELDS)."""
    return name not in SAMPLER_FIELDS or at_least("1.3.0rc29")


def has_tensorrt_backend() -> bool:
    """``tensorrt_llm._tensorrt_engine`` (``LLM(backend="tensorrt")``): removed for 1.3 (PRs #15763, #15918)."""
    return not at_least("1.3.0rc0")


def moe_auto() -> bool:
    """``MoeConfig.backend`` has ``AUTO`` (its default): the 1.1-era llm_args.py has ``CUTLASS`` as default and no
    ``AUTO``; later sources default to ``AUTO``. The fake takes 1.2.0 as the first with it."""
    return at_least("1.2.0")


def has_conversation_params() -> bool:
    """``generate_async(..., conversation_params=ConversationParams(...))`` and attention DP's conversation-affinity
    router (``attention_dp_config.kv_cache_routing_conversation_affinity``): not in 1.1 or 1.2.x; the fake takes them
    from 1.3.0rc21 on, reading NVIDIA Dynamo's TensorRT-LLM worker (``dynamo/trtllm/request_handlers/handler_base.py``: the ConversationParams API "requires a release newer than
    1.3.0rc20")."""
    return at_least("1.3.0rc21")


def has_tracing() -> bool:
    """OpenTelemetry tracing (NVIDIA/TensorRT-LLM PR #5897): ``generate_async(..., trace_headers: Optional[Mapping[str,
    str]] = None, ...)`` and the LLM argument ``otlp_traces_endpoint``. Not in 1.1.0 (its ``llm.py``
    ``generate_async`` ends at ``cache_salt``; its ``trtllm-serve`` has no ``--otlp_traces_endpoint``); in 1.2.0's
    ``llm.py`` and ``trtllm-serve``, and on main since (1.2.1, 1.3.0rcN, 1.4.0rc1). 1.2 release candidates are the
    fake's reading (the merge came after the 1.1 branch)."""
    return at_least("1.2.0rc0")


def has_grpc_server() -> bool:
    """``trtllm-serve MODEL --grpc`` (TensorRT-LLM's gRPC engine server, ``trtllm.TrtllmService``): not in the
    releases on PyPI (1.1, 1.2.x: PR #11037 merged 2026-01-29, after them); in the 1.3.0 release candidates
    after it, first with the protocol in TensorRT-LLM's tree, later with SMG's ``smg-grpc-proto`` bindings
    (``tensorrt_llm/grpc/smg/``). The fake plays it from 1.3.0rc21, the first release a public deployment
    documents running it (NVIDIA Dynamo's TensorRT-LLM sidecar README), with the protocol vendored in
    ``trtllm_responses/executors/trtllm_grpc/`` (docs/a-fleet-of-engines.md has the table)."""
    return at_least("1.3.0rc21")


def has_openengine_generate() -> bool:
    """``trtllm-serve MODEL --grpc --grpc-protocol openengine`` answering ``Generate`` and ``Control`` with the
    prefill/decode hand-off (PR #17992): in trunk nightlies from 1.3.0rc27.dev20260917 on (Dynamo's
    ``launch/disagg.sh``: "the first releases carrying the OpenEngine servicer"), surely in 1.3.0rc28 (PR
    #19346 bumped trunk to it on 2026-09-17). Earlier, PR #17084's stub answered every RPC ``UNIMPLEMENTED``;
    the fake plays OpenEngine from 1.3.0rc28 and refuses it before."""
    return at_least("1.3.0rc28")


def guides_one_model_drafting() -> bool:
    """Guided decoding with one-model speculative decoding (Eagle3 one-model, MTP): PR #6948 gave the executor creator
    a ``CapturableGuidedDecoder`` for them; before it ``_torch/pyexecutor/py_executor_creator.py`` raised ``ValueError(
    "Guided decoding is only supported with speculative decoding that has a dedicated drafter (two-model engine).")``
    (the version in the public index; issue #7006, 2025-08-18). The fake takes 1.1.0 as the first release with it and
    plays its release candidates without it (the merge date falls among them, not checked one by one)."""
    return at_least("1.1.0")


def seeds_every_row() -> bool:
    """Whether each row of a sampling call draws from its own ``seed``. PR #17172 (1.3.0rc29 on) hands FlashInfer a
    seed per row, but the FlashInfer 1.3.0rc29 and 1.4.0rc1 pin (``flashinfer-python==0.6.18``) reads only
    ``seed_arr[0]`` (``include/flashinfer/sampling.cuh``; the fix, flashinfer PRs #2345 and #4861, unmerged), and
    TensorRT-LLM warns that "only the first row's seed applies" (``_torch/pyexecutor/sampler/seed_manager.py``):
    no release played seeds every row."""
    return False
