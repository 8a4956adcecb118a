"""What a TensorRT-LLM release cannot do, decided at start or said in the response (issue 44, points 7, 8, 10).

- guided decoding with one-model speculative decoding (Eagle3 one-model, MTP): TensorRT-LLM's executor creator
  raised for it until PR #6948 (the fake's 1.1.0 release candidates); ``serve`` with the default flags starts
  there, with guided decoding off and constrained requests refused with a 400 naming what works;
- ``seed`` on 1.3.0rc29 and 1.4.0rc1: applied, but exact only for a request sampled alone (PR #17172's warning,
  FlashInfer 0.6.18 reading one seed per sampling call); the response says so;
- after the engine dies ``generate_async`` raises ``RuntimeError("LLM is shutting down")``, as TensorRT-LLM's
  ``llm.py``; the client reads that the engine is gone, and ``/health`` says so.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from support.reader_corpus import JSON_FORMAT
from support.server_harness import ServerFactory
from support.trtllm_harness import executor_for

from trtllm_responses.harmony import HarmonyEncoding

#: NVIDIA's gpt-oss Eagle3 recipe: ``eagle3_one_model`` unset is TensorRT-LLM's default, True (one model).
EAGLE3 = {"decoding_type": "Eagle", "max_draft_len": 3, "speculative_model_dir": "/ckpt/eagle3"}
TWO_MODEL = {**EAGLE3, "eagle3_one_model": False}
MTP = {"decoding_type": "MTP", "num_nextn_predict_layers": 1}
#: py_executor_creator.py before PR #6948 (the GUIDED_DECODER stage of create_py_executor).
CREATOR_REFUSAL = "Guided decoding is only supported with speculative decoding that has a dedicated drafter (two-model engine)."


def _play(fake_trtllm: Any, monkeypatch: pytest.MonkeyPatch, release: str) -> None:
    monkeypatch.setattr(fake_trtllm, "__version__", release)


def _post(running: Any, body: dict[str, Any]) -> httpx.Response:
    # A wide bound: xgrammar compiles the first grammar on a shared, loaded machine.
    with httpx.Client(base_url=running.base_url, timeout=120) as client:
        return client.post("/v1/responses", json=body)


# -- guided decoding with one-model speculative decoding ---------------------------------------------------


@pytest.mark.parametrize("spec", [EAGLE3, {**EAGLE3, "decoding_type": "Eagle3"}, MTP])
def test_the_fake_creator_refuses_one_model_drafting_with_guided_decoding_before_pr_6948(
    fake_trtllm: Any, monkeypatch: pytest.MonkeyPatch, spec: dict[str, Any]
) -> None:
    _play(fake_trtllm, monkeypatch, "1.1.0rc4")
    with pytest.raises(ValueError) as refused:
        fake_trtllm.LLM("/ckpt/m", guided_decoding_backend="xgrammar", speculative_config=spec)
    assert str(refused.value) == CREATOR_REFUSAL
    fake_trtllm.LLM("/ckpt/m", speculative_config=spec).shutdown()  # without guided decoding: built
    fake_trtllm.LLM("/ckpt/m", guided_decoding_backend="xgrammar", speculative_config=TWO_MODEL).shutdown()
    _play(fake_trtllm, monkeypatch, "1.1.0")  # CapturableGuidedDecoder (PR #6948)
    fake_trtllm.LLM("/ckpt/m", guided_decoding_backend="xgrammar", speculative_config=spec).shutdown()


def test_which_releases_guide_one_model_drafting() -> None:
    from trtllm_responses.executors.trtllm_releases import Release, one_model_drafting

    assert one_model_drafting(EAGLE3) == "Eagle3 one-model"
    assert one_model_drafting(MTP) == "MTP one-model"
    assert one_model_drafting(TWO_MODEL) is None and one_model_drafting(None) is None
    assert one_model_drafting({"decoding_type": "NGram", "max_draft_len": 2}) is None
    refusal = Release("1.1.0rc4").guided_drafting_refusal(EAGLE3)
    assert refusal is not None and "PR #6948" in refusal and "eagle3_one_model: false" in refusal
    for version in ("1.1.0", "1.2.1", "1.3.0rc29", "1.4.0rc1"):
        assert Release(version).guided_drafting_refusal(EAGLE3) is None, version
    assert Release("1.1.0rc4").guided_drafting_refusal(TWO_MODEL) is None


@pytest.fixture
def drafting(
    fake_trtllm: Any,
    encoding: HarmonyEncoding,
    serve: ServerFactory,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> Any:
    """``drafting(release, speculative_config)``: the fake plays ``release``; a server on a fresh TensorRT-LLM executor
    with that speculative decoding and the default ``--guided_decoding on`` (its start logged into ``caplog``)."""

    def start(release: str, spec: dict[str, Any]) -> tuple[Any, Any]:
        _play(fake_trtllm, monkeypatch, release)
        caplog.set_level("INFO")
        executor = executor_for(encoding, speculative_config=spec)
        return executor, serve(executor)

    return start


def test_default_flags_start_with_one_model_drafting_where_the_creator_would_refuse(
    drafting: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """1.1.0rc4 with NVIDIA's Eagle3 recipe and ``--guided_decoding on`` (the default): the engine is built without
    guided decoding, so it starts; a constrained request is a 400 saying why and what works; others are served."""
    executor, started = drafting("1.1.0rc4", EAGLE3)
    with started as running:
        assert executor._llm.args.guided_decoding_backend is None
        assert _post(running, {"input": "hello"}).json()["status"] == "completed"
        answer = _post(running, {"input": "where?", "text": JSON_FORMAT})
        assert answer.status_code == 400, answer.text
        error = answer.json()["error"]
        assert (error["param"], error["code"]) == ("text.format", "unsupported_parameter")
        assert "eagle3_one_model: false" in error["message"] and "1.1.0" in error["message"]
    assert "Guided decoding is off" in caplog.text and "PR #6948" in caplog.text


def test_one_model_drafting_is_guided_from_1_1_0(drafting: Any, caplog: pytest.LogCaptureFixture) -> None:
    executor, started = drafting("1.1.0", MTP)
    with started as running:
        assert executor._llm.args.guided_decoding_backend == "xgrammar"
        answer = _post(running, {"input": '{"city": "Oslo"}', "text": JSON_FORMAT})
        assert answer.status_code == 200 and answer.json()["status"] == "completed", answer.text
    assert "MTP one-model" in caplog.text and "CapturableGuidedDecoder" in caplog.text


def test_an_operators_own_guided_backend_is_refused_at_start_where_it_cannot_be_built(
    fake_trtllm: Any, encoding: HarmonyEncoding, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The LLM arguments name ``guided_decoding_backend`` themselves (not serve's default): refused before loading."""
    import asyncio

    from trtllm_responses.executors.base import ExecutorError

    _play(fake_trtllm, monkeypatch, "1.1.0rc4")
    executor = executor_for(encoding, speculative_config=EAGLE3, guided_decoding_backend="xgrammar")
    with pytest.raises(ExecutorError, match="Drop guided_decoding_backend"):
        asyncio.run(executor.start())
    assert executor._llm is None, "nothing was built"


# -- seed on 1.3+: what it guarantees -----------------------------------------------------------------------


@pytest.mark.parametrize("release", ["1.3.0rc29", "1.4.0rc1"])
def test_a_seed_is_sent_and_the_response_says_what_it_guarantees(
    fake_trtllm: Any,
    encoding: HarmonyEncoding,
    serve: ServerFactory,
    monkeypatch: pytest.MonkeyPatch,
    release: str,
) -> None:
    _play(fake_trtllm, monkeypatch, release)
    executor = executor_for(encoding)
    with serve(executor) as running:
        seeded = _post(running, {"input": "hello", "seed": 7}).json()
        assert executor._llm.received[-1].seed == 7
        note = seeded["sampling_notes"]["seed"]
        assert "sampled alone" in note and "FlashInfer 0.6.18" in note and "#17172" in note
        assert "sampling_notes" not in _post(running, {"input": "hello"}).json(), "no seed, no note"


def test_the_fake_seeds_a_request_exactly_only_when_it_is_sampled_alone(
    fake_trtllm: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PR #17172 on FlashInfer 0.6.18: every row of a sampling call draws from the first row's seed."""
    _play(fake_trtllm, monkeypatch, "1.4.0rc1")
    from tensorrt_llm.sampling_params import SamplingParams

    llm = fake_trtllm.LLM("/ckpt/m")
    seeded = SamplingParams(seed=7, temperature=1.0, top_p=1.0)
    alone = [llm._request_rng(seeded, 1).random() for _ in range(2)]
    assert alone[0] == alone[1], "sampled alone, a seed reproduces"
    other = llm.generate_async([1, 2, 3], SamplingParams(seed=11), streaming=True)  # a running first row
    beside = llm._request_rng(seeded, 2).random()
    assert beside != alone[0], "beside another request, its own seed does not apply"
    other.abort()
    llm.shutdown()


# -- after the engine dies -----------------------------------------------------------------------------------


def test_after_the_engine_dies_generate_async_raises_as_tensorrt_llm(fake_trtllm: Any) -> None:
    from tensorrt_llm.sampling_params import SamplingParams

    llm = fake_trtllm.LLM("/ckpt/m")
    llm._executor.shutdown()
    with pytest.raises(RuntimeError) as raised:
        llm.generate_async([1, 2], SamplingParams(), streaming=True)
    assert type(raised.value) is RuntimeError and str(raised.value) == "LLM is shutting down"


def test_a_request_after_the_engine_died_reads_so(
    fake_trtllm: Any, encoding: HarmonyEncoding, serve: ServerFactory
) -> None:
    executor = executor_for(encoding)
    with serve(executor) as running, httpx.Client(base_url=running.base_url, timeout=30) as client:
        assert client.post("/v1/responses", json={"input": "#crash"}).json()["status"] == "failed"
        assert client.get("/health").status_code == 503
        after = client.post("/v1/responses", json={"input": "hello"}).json()
        assert after["status"] == "failed"
        message = after["error"]["message"]
        assert "LLM is shutting down" in message and "engine is gone" in message, message
