"""What each TensorRT-LLM release offers this server, read from its version string alone.

Nothing here imports ``tensorrt_llm``: ``trtllm.py`` reads ``tensorrt_llm.__version__`` and asks
:class:`Release`. Each difference names where it comes from (NVIDIA/TensorRT-LLM pull requests, and
the releases' PyPI sdists' PKG-INFO, recorded in ``constraints/``):

- **The TensorRT engine backend** (``LLM(backend="tensorrt")``, ``tensorrt_llm._tensorrt_engine``) is gone
  from 1.3: NVIDIA removed the legacy TensorRT backend on main in July 2026 (PR #15763, its examples;
  PR #15918, "BREAKING: Remove python modules and tests for legacy TensorRT backend"; PR #16369, its C++),
  and 1.3.0rc29's and 1.4.0rc1's requirements no longer hold ``tensorrt`` (1.2.1's pin
  ``tensorrt~=10.14.1``).
- **Sampling settings the PyTorch sampler applies.** ``TorchSampler`` (the PyTorch backend's default)
  ignored ``frequency_penalty``/``presence_penalty``, ``min_p`` and ``seed`` while ``SamplingParams``
  accepted them (issue #9442, seen on 1.1 and 1.2; PR #16485: "the params are accepted by SamplingParams
  but silently ignored"). They came with PR #16485 (penalties, July 2026), PR #16590 (``min_p``, July
  2026) and PR #17172 (per-request ``seed``, August 2026), all merged on main before 1.3.0rc29
  (2026-09-29) and 1.4.0rc1 (2026-10-21). 1.1 to 1.2.1 lack all four; 1.3 release candidates before
  rc29 are treated as lacking them too (not checked one by one: refusing is the safe reading).
- **Conversation affinity** (``LLM.generate_async(..., conversation_params=ConversationParams(...))``,
  ``tensorrt_llm/conversation_params.py``; attention DP's ``attention_dp_config.kv_cache_routing_conversation_
  affinity``, ``ConversationAwareADPRouter``): not in 1.1, 1.2.0 or 1.2.1; in the 1.3.0 release candidates from
  about rc21 (1.3.0rc29, 1.4.0rc1 have it), taken here as present from 1.3.0rc21, as NVIDIA Dynamo's TensorRT-LLM worker reads it (``dynamo/trtllm/request_handlers/
  handler_base.py``: the ConversationParams API "requires a release newer than 1.3.0rc20"). Whether
  ``generate_async`` takes ``conversation_params`` is read from its signature at start, whatever the version.
- **OpenTelemetry tracing into the engine** (NVIDIA/TensorRT-LLM PR #5897, "Add opentelemetry tracing"):
  ``LLM.generate_async(..., trace_headers: Optional[Mapping[str, str]] = None, ...)`` ("Trace headers",
  ``tensorrt_llm/llmapi/llm.py``), the LLM argument ``otlp_traces_endpoint`` (``BaseLLM.__init__`` calls
  ``tracing.init_tracer("trt.llm", ...)`` with it) and ``tensorrt_llm/llmapi/tracing.py``. Not in 1.1.0 (its
  ``generate_async`` ends at ``cache_salt``; its ``trtllm-serve`` has no ``--otlp_traces_endpoint``); in 1.2.0
  (both, and ``trtllm-serve --otlp_traces_endpoint``), and on main since (its ``generate_async`` still takes
  ``trace_headers`` beside ``conversation_params`` and ``priority``), so in 1.2.1, 1.3.0rcN and 1.4.0rc1. 1.2
  pre-releases are taken as having it. Whether ``generate_async`` takes ``trace_headers`` is read from its
  signature at start, whatever the version; the version decides ``otlp_traces_endpoint`` only.
- **The gRPC engine server** (``trtllm-serve MODEL --grpc``, ``executors/trtllm_grpc/``): none in 1.1 to 1.2.1
  (PR #11037 merged 2026-01-29, after them); the 1.3.0 release candidates from about rc2 carry it, first with an
  early revision of the protocol in TensorRT-LLM's own tree (``end_id``, ``stop_words``, ``GenerateError``),
  then SMG's (``smg-grpc-proto``), which ``tensorrt_llm/grpc/smg/`` serves behind the extra
  ``tensorrt_llm[grpc-smg]`` from 1.3.0rc25 (NVIDIA Dynamo's TensorRT-LLM sidecar). The gRPC executor speaks
  SMG's revision (``stop_token_ids``; the early one would ignore them and never stop at ``<|call|>``), so it
  serves engines from 1.3.0rc25 (docs/a-fleet-of-engines.md#which-releases-serve-it).
- **Guided decoding with speculative decoding.** PR #6300 (part 1, two-model engines: a dedicated drafter, Eagle3
  with ``eagle3_one_model: false``, NGram, a draft model) let the executor creator build a ``GuidedDecoder`` with
  speculative decoding; until PR #6948 (part 2, one-model engines: Eagle3 one-model, MTP) it still raised, in
  ``_torch/pyexecutor/py_executor_creator.py``'s guided-decoder stage, ``ValueError("Guided decoding is only
  supported with speculative decoding that has a dedicated drafter (two-model engine).")`` for a one-model config
  (the version the public index holds; NVIDIA/TensorRT-LLM issue #7006, filed 2025-08-18, points at it). From PR
  #6948 the creator gives one-model modes a ``CapturableGuidedDecoder`` (``support_capturable_guided_decoder``:
  MTP one-model and Eagle3 one-model, in every later ``_torch/speculative/interface.py`` stored), and the
  combination checks (``validate_feature_combination``) no longer name guided decoding. The PR's merge is after
  2025-08-18 and before the tech blog of PR #7864 (2025-09-19) that describes both parts; 1.1.0 is taken as the first
  release with it, its release candidates as lacking it (not checked one by one: refusing is the safe reading).
  Where it is lacking, ``serve`` with the default flags builds the engine without guided decoding and refuses
  constrained requests with a 400 naming what works (:meth:`Release.guided_drafting_refusal`).
- **What a seed guarantees on 1.3.0rc29 and 1.4.0rc1.** PR #17172 carries a per-row Philox ``(seed, offset)`` into
  FlashInfer's sampling kernels, but the FlashInfer these releases pin (``flashinfer-python==0.6.18``, their
  requirements in ``constraints/``) reads only ``seed[0]``/``offset[0]`` of a sampling call (``sampling.cuh``:
  ``philox_seed = seed_arr ? seed_arr[0] : seed_val``; the fix, flashinfer PRs #2345 and #4861, unmerged), so every
  row of a call draws from the first row's seed; TensorRT-LLM warns once ("SamplingParams.seed is only partially
  effective with the TorchSampler ... only the first row's seed applies",
  ``_torch/pyexecutor/sampler/seed_manager.py``). A seed reproduces a response only when the request is sampled
  alone (:attr:`Release.seed_note`, said in the response's ``sampling_notes``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["MIN_TRTLLM_VERSION", "SAMPLER_SETTINGS", "Release", "one_model_drafting"]

#: The oldest TensorRT-LLM release served, in process or over gRPC (``trtllm_setup.check_trtllm_version`` says why).
MIN_TRTLLM_VERSION = (1, 1)

#: The sampling settings whose support depends on the release, and the pull request that brought each to
#: the PyTorch sampler.
SAMPLER_SETTINGS = {
    "seed": "PR #17172 (per-request seed in TorchSampler)",
    "min_p": "PR #16590 (min_p in TorchSampler)",
    "frequency_penalty": "PR #16485 (penalties in TorchSampler)",
    "presence_penalty": "PR #16485 (penalties in TorchSampler)",
}
#: The first release checked to apply all of SAMPLER_SETTINGS, as (major, minor, patch, pre-release rank).
_SAMPLER_FROM = (1, 3, 0, 29)
_SAMPLER_FROM_TEXT = "1.3.0rc29"
#: The first release with ConversationParams and conversation-affinity routing (see the module docstring).
_AFFINITY_FROM = (1, 3, 0, 21)
#: The first release with OpenTelemetry tracing (``otlp_traces_endpoint``, ``trace_headers``; see the module docstring).
_TRACING_FROM = (1, 2, 0, -1)
#: The first release whose gRPC server surely speaks SMG's protocol (see the module docstring).
_SMG_GRPC_FROM = (1, 3, 0, 25)
_SMG_GRPC_FROM_TEXT = "1.3.0rc25"
#: The first release whose executor creator guides one-model speculative decoding (PR #6948; module docstring).
_GUIDED_ONE_MODEL_FROM = (1, 1, 0, 10**9)
#: The FlashInfer pin under which a seed holds only for a request sampled alone (PR #17172; every release that applies
#: seeds, 1.3.0rc29 and 1.4.0rc1: none is known yet to seed each row of a sampling call).
_ROW_SEEDS_PINNED = "flashinfer-python==0.6.18"
#: The first release without the TensorRT engine backend.
_NO_TENSORRT_FROM = (1, 3, 0, -1)
_FINAL = 10**9  # a final release sorts after its release candidates

_VERSION = re.compile(r"^\s*(\d+)\.(\d+)(?:\.(\d+))?(?:\.?(rc|a|b|dev)\.?(\d+))?")


@dataclass(frozen=True, slots=True)
class Release:
    """One TensorRT-LLM version and what it offers (see the module docstring)."""

    version: str

    @property
    def key(self) -> tuple[int, int, int, int] | None:
        """``(major, minor, patch, pre)`` (``pre``: the rc number, or a large number for a final release), or
        None for a version string that does not parse."""
        match = _VERSION.match(self.version)
        if match is None:
            return None
        major, minor, patch, kind, number = match.groups()
        pre = _FINAL if kind is None else (int(number) if kind == "rc" else -1)
        return int(major), int(minor), int(patch or 0), pre

    def _at_least(self, bound: tuple[int, int, int, int]) -> bool:
        key = self.key
        return key is not None and key >= bound

    @property
    def tensorrt_backend_refusal(self) -> str | None:
        """Why ``--backend tensorrt`` cannot run on this release, or None where it exists."""
        if not self._at_least(_NO_TENSORRT_FROM):
            return None
        return (
            f"TensorRT-LLM {self.version} has no TensorRT engine backend: NVIDIA removed it for 1.3 (PRs #15763 and "
            "#15918 removed the legacy TensorRT backend's examples and Python modules; the release no longer "
            "depends on `tensorrt`). gpt-oss runs on the PyTorch backend: use --backend pytorch (the default)."
        )

    @property
    def grpc_refusal(self) -> str | None:
        """Why the gRPC executor cannot drive this release's ``trtllm-serve --grpc``, or None where it can."""
        if self._at_least(_SMG_GRPC_FROM):
            return None
        return (
            f"TensorRT-LLM {self.version or '(version not said)'}'s gRPC server predates SMG's protocol, which this "
            f"server speaks (its stop tokens would be ignored): run TensorRT-LLM {_SMG_GRPC_FROM_TEXT} or newer "
            "(`pip install 'tensorrt_llm[grpc-smg]'`; docs/a-fleet-of-engines.md#which-releases-serve-it)"
        )

    @property
    def conversation_affinity(self) -> bool:
        """Whether attention DP's ``attention_dp_config.kv_cache_routing_conversation_affinity`` exists here."""
        return self._at_least(_AFFINITY_FROM)

    @property
    def otlp_traces_endpoint(self) -> bool:
        """Whether the LLM arguments have ``otlp_traces_endpoint`` (TensorRT-LLM's own OTLP exporter, PR #5897)."""
        return self._at_least(_TRACING_FROM)

    def guided_drafting_refusal(self, speculative_config: object) -> str | None:
        """Why this release cannot build guided decoding with ``speculative_config`` (a one-model drafter before
        PR #6948), saying what works; None where it can, or where nothing is drafted in one model."""
        kind = one_model_drafting(speculative_config)
        if kind is None or self._at_least(_GUIDED_ONE_MODEL_FROM):
            return None
        return (
            f"TensorRT-LLM {self.version} cannot constrain {kind} speculative decoding (its executor creator raises "
            "'Guided decoding is only supported with speculative decoding that has a dedicated drafter (two-model "
            "engine).' until NVIDIA/TensorRT-LLM PR #6948, in 1.1.0), so this server runs it without guided "
            "decoding: structured outputs, required or named tool choices and custom-tool grammars are refused. "
            "Constrained requests are served with a two-model draft (speculative_config.eagle3_one_model: false), "
            "without speculative decoding, or on TensorRT-LLM 1.1.0 or newer "
            "(docs/serving-on-tensorrt-llm.md#tensorrt-llm-versions)."
        )

    @property
    def seed_note(self) -> str | None:
        """What a request's ``seed`` guarantees on this release where that is less than reproducing the response
        (said in the response's ``sampling_notes``); None where the sampler ignores seeds (refused before)."""
        if not self._at_least(_SAMPLER_FROM):
            return None
        return (
            f"TensorRT-LLM {self.version} applies the seed (PR #17172), but FlashInfer 0.6.18 ({_ROW_SEEDS_PINNED}) "
            "reads one seed per sampling call: the seed reproduces this response only when it is sampled "
            "alone; sampled beside other requests it draws from the first row's seed (TensorRT-LLM's own warning; "
            "flashinfer PRs #2345, #4861)."
        )

    @property
    def unapplied_sampling(self) -> dict[str, str]:
        """The sampling settings this release's PyTorch sampler accepts but does not apply, with why."""
        if self._at_least(_SAMPLER_FROM):
            return {}
        return {
            name: (
                f"TensorRT-LLM {self.version}'s PyTorch sampler does not apply '{name}' (it accepts and ignores it, "
                f"NVIDIA/TensorRT-LLM issue #9442); it is applied from TensorRT-LLM {_SAMPLER_FROM_TEXT} on "
                f"({source})."
            )
            for name, source in SAMPLER_SETTINGS.items()
        }


def one_model_drafting(speculative_config: object) -> str | None:
    """The one-model speculative decoding ``speculative_config`` asks for (``Eagle3 one-model``, ``MTP one-model``), or
    None: none, or drafted by a model or drafter of its own (two-model Eagle3, NGram, a draft model).

    As TensorRT-LLM reads the LLM argument: ``EagleDecodingConfig.eagle3_one_model`` defaults to True (the
    one-model Eagle3 worker); MTP runs inside the target model (``SpeculativeDecodingMode.MTP`` /
    ``MTP_EAGLE_ONE_MODEL``) unless ``mtp_eagle_one_model: false`` (``MTP_EAGLE``, a drafter of its own).
    """
    if not isinstance(speculative_config, Mapping):
        return None
    kind = str(speculative_config.get("decoding_type") or "")
    if kind in ("Eagle", "Eagle3"):
        return "Eagle3 one-model" if speculative_config.get("eagle3_one_model", True) is not False else None
    if kind == "MTP":
        return "MTP one-model" if speculative_config.get("mtp_eagle_one_model", True) is not False else None
    return None
