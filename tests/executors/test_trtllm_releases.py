"""What the TensorRT-LLM executor does per release (issue 29), over the fake playing each release.

- the TensorRT engine backend only where it exists (refused with the reason on 1.3 and later);
- seed, min_p and the penalties applied where the release's PyTorch sampler applies them, else refused with a
  400 (or dropped, the response echoing what was used) — never echoed as applied;
- guided decoding on or off (``--guided_decoding``), and with speculative decoding (NVIDIA's Eagle3 recipe starts);
- a session's turns kept on one attention-DP rank (``scheduling_params``, relaxed), so its prefix is reused there
  (per release: ``test_trtllm_kv.py``);
- ``/health`` following the engine's own health check;
- NVIDIA's config-database files accepted unchanged; the fake's argument model and ``Logprob`` as TensorRT-LLM's.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.checkpoints import make_checkpoint
from support.paths import DATA, FAKE_TRTLLM, ROOT
from support.reader_corpus import JSON_FORMAT, function
from support.server_harness import ServerFactory
from support.trtllm_harness import executor_for

from trtllm_responses.cli.command import build_parser
from trtllm_responses.cli.launch import resolve_launch
from trtllm_responses.cli.serve_options import server_config
from trtllm_responses.executors.trtllm import (
    TrtllmExecutor,
    TrtllmUnavailableError,
    attention_dp_rank,
    build_tensorrt_engine,
    check_backend,
    check_llm_arguments,
)
from trtllm_responses.executors.trtllm_releases import SAMPLER_SETTINGS, Release
from trtllm_responses.harmony import HarmonyEncoding
from trtllm_responses.responses.sampling import SamplingDefaults

TUNED = {"seed": 9, "min_p": 0.05, "frequency_penalty": 0.4, "presence_penalty": -0.2}


def _play(fake_trtllm: Any, monkeypatch: pytest.MonkeyPatch, release: str) -> None:
    monkeypatch.setattr(fake_trtllm, "__version__", release)


@pytest.fixture
def on_release(
    fake_trtllm: Any, encoding: HarmonyEncoding, serve: ServerFactory, monkeypatch: pytest.MonkeyPatch
) -> Any:
    """``on_release(version, **config)``: the fake plays ``version``; a server on a fresh TensorRT-LLM executor."""

    def start(release: str, **config: Any) -> tuple[TrtllmExecutor, Any]:
        _play(fake_trtllm, monkeypatch, release)
        executor = executor_for(encoding)
        return executor, serve(executor, **config)

    return start


# -- what each release offers ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("version", "tensorrt", "sampler"),
    [
        ("1.1.0", True, False),
        ("1.2.0", True, False),
        ("1.2.1", True, False),
        ("1.3.0rc22", False, False),
        ("1.3.0rc29", False, True),
        ("1.3.0", False, True),
        ("1.4.0rc1", False, True),
    ],
)
def test_each_release_says_what_it_offers(version: str, tensorrt: bool, sampler: bool) -> None:
    release = Release(version)
    assert (release.tensorrt_backend_refusal is None) is tensorrt
    assert (release.unapplied_sampling == {}) is sampler
    if not sampler:
        assert set(release.unapplied_sampling) == set(SAMPLER_SETTINGS)
        assert (
            "PR #17172" in release.unapplied_sampling["seed"]
            and version in release.unapplied_sampling["seed"]
        )


def test_the_tensorrt_backend_is_refused_where_it_is_gone(
    fake_trtllm: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    check_backend("tensorrt", "1.2.1")  # still there
    check_backend("pytorch", "1.4.0rc1")
    with pytest.raises(
        ValueError, match=r"1\.4\.0rc1 has no TensorRT engine backend.*#15918.*--backend pytorch"
    ):
        check_backend("tensorrt", "1.4.0rc1")
    _play(fake_trtllm, monkeypatch, "1.4.0rc1")
    with pytest.raises(ModuleNotFoundError):  # the fake, like 1.4, has no _tensorrt_engine
        __import__("tensorrt_llm._tensorrt_engine")
    with pytest.raises(TrtllmUnavailableError, match="no TensorRT engine backend"):
        build_tensorrt_engine(Path("/nowhere"), {}, Path("/nowhere/out"))


def test_build_backend_tensorrt_is_refused_on_1_4_with_the_reason(
    tmp_path: Path, fake_trtllm: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``build --backend tensorrt`` of an architecture TensorRT-LLM could build engines for (gpt-oss never could:
    serve refuses it for any release): on 1.2.1 it builds, on 1.4.0rc1 it says why it cannot."""
    from trtllm_responses.cli.build import BuildError, build_bundle

    checkpoint = make_checkpoint(tmp_path, "llama-tiny", model_type="llama", quant=None)
    _play(fake_trtllm, monkeypatch, "1.2.1")
    built = build_bundle(checkpoint, output_dir=tmp_path / "old", backend="tensorrt", max_batch_size=8)
    assert built.manifest["backend"] == "tensorrt"
    _play(fake_trtllm, monkeypatch, "1.4.0rc1")
    with pytest.raises(BuildError, match=r"1\.4\.0rc1 has no TensorRT engine backend"):
        build_bundle(checkpoint, output_dir=tmp_path / "new", backend="tensorrt", max_batch_size=8)


# -- sampling settings: applied, refused or dropped, never echoed as applied ---------------------------


def _post(running: Any, body: dict[str, Any], path: str = "/v1/responses") -> httpx.Response:
    with httpx.Client(base_url=running.base_url, timeout=60) as client:
        return client.post(path, json=body)


def test_settings_the_sampler_ignores_are_refused_by_default(on_release: Any) -> None:
    executor, running = on_release("1.2.1")
    with running:
        for name, value in TUNED.items():
            answer = _post(running, {"input": "hello", name: value})
            assert answer.status_code == 400, (name, answer.text)
            error = answer.json()["error"]
            assert (error["param"], error["code"], error["type"]) == (
                name,
                "unsupported_parameter",
                "invalid_request_error",
            )
            assert "1.2.1" in error["message"] and "1.3.0rc29" in error["message"]
        # A neutral value changes nothing: it passes, and nothing is sent.
        answer = _post(running, {"input": "hello", "presence_penalty": 0, "min_p": 0})
        assert answer.status_code == 200, answer.text
        assert answer.json()["presence_penalty"] == 0.0 and "min_p" not in answer.json()
        sent = executor._llm.received[-1]
        assert (sent.presence_penalty, sent.min_p, sent.seed) == (None, None, None)
        # Chat Completions: the same refusal, in its own envelope.
        chat = _post(
            running, {"messages": [{"role": "user", "content": "hi"}], "seed": 3}, "/v1/chat/completions"
        )
        assert chat.status_code == 400 and chat.json()["error"]["param"] == "seed"


def test_ignore_drops_them_and_the_response_echoes_what_was_used(on_release: Any) -> None:
    executor, running = on_release("1.2.0", sampling=SamplingDefaults(unsupported="ignore"))
    with running:
        answer = _post(running, {"input": "hello", "top_k": 20, **TUNED})
        assert answer.status_code == 200, answer.text
        body = answer.json()
        assert (body["frequency_penalty"], body["presence_penalty"]) == (0.0, 0.0) and "min_p" not in body
        assert body["top_k"] == 20
        sent = executor._llm.received[-1]
        assert (sent.seed, sent.min_p, sent.frequency_penalty, sent.presence_penalty, sent.top_k) == (
            None, None, None, None, 20,
        )  # fmt: skip
        chat = _post(
            running,
            {"messages": [{"role": "user", "content": "hi"}], "seed": 3, "n": 2},
            "/v1/chat/completions",
        )
        assert chat.status_code == 200, chat.text
        assert [p.seed for p in executor._llm.received[-2:]] == [None, None], "no per-choice seed is made up"


def test_a_release_whose_sampler_applies_them_gets_them(on_release: Any) -> None:
    executor, running = on_release("1.4.0rc1")
    with running:
        answer = _post(running, {"input": "hello", **TUNED})
        assert answer.status_code == 200, answer.text
        body, sent = answer.json(), executor._llm.received[-1]
        for name, value in TUNED.items():
            assert getattr(sent, name) == value, name
            if name != "seed":
                assert body[name] == value, name
        chat = _post(
            running,
            {"messages": [{"role": "user", "content": "hi"}], "seed": 3, "n": 2},
            "/v1/chat/completions",
        )
        assert chat.status_code == 200 and sorted(p.seed for p in executor._llm.received[-2:]) == [3, 4]


def test_operator_defaults_the_sampler_ignores_stop_the_start(tmp_path: Path, on_release: Any) -> None:
    """``serve --min_p 0.1`` on 1.2.0: exits before loading anything, saying why and what to do; with
    ``--unsupported_sampling ignore`` it serves without it."""
    command = [
        sys.executable,
        "-m",
        "trtllm_responses.cli",
        "serve",
        str(make_checkpoint(tmp_path)),
        "--min_p",
        "0.1",
    ]
    env = {**os.environ, "PYTHONPATH": f"{FAKE_TRTLLM}{os.pathsep}{ROOT}", "FAKE_TRTLLM_VERSION": "1.2.0"}
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 2, done.stderr[-2000:]
    assert "sampling defaults cannot be applied" in done.stderr and "'min_p'" in done.stderr
    assert "--unsupported_sampling ignore" in done.stderr
    _, running = on_release("1.2.0", sampling=SamplingDefaults(min_p=0.1, unsupported="ignore"))
    with running:
        assert "min_p" not in _post(running, {"input": "hello"}).json()


def test_the_fake_seeds_only_where_the_sampler_does(
    fake_trtllm: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tensorrt_llm._release import sampler_applies

    _play(fake_trtllm, monkeypatch, "1.2.1")
    assert not sampler_applies("seed") and sampler_applies("top_k")
    _play(fake_trtllm, monkeypatch, "1.4.0rc1")
    assert sampler_applies("seed") and sampler_applies("presence_penalty")


# -- guided decoding: on, off, with speculative decoding ---------------------------------------------


def test_guided_decoding_off_builds_no_matcher_and_refuses_constraints(
    fake_trtllm: Any, encoding: HarmonyEncoding, serve: ServerFactory
) -> None:
    executor = TrtllmExecutor({"model": "/ckpt/gpt-oss-tiny"}, end_id=encoding.return_, guided="off")
    with serve(executor) as running:
        assert executor._llm.args.guided_decoding_backend is None
        assert _post(running, {"input": "hello"}).status_code == 200
        answer = _post(running, {"input": "where?", "text": JSON_FORMAT})
        assert answer.status_code == 400, answer.text
        error = answer.json()["error"]
        assert (error["param"], error["code"]) == ("text.format", "unsupported_parameter")
        assert "--guided_decoding off" in error["message"]
        required = _post(running, {"input": "call", "tools": [function("f")], "tool_choice": "required"})
        assert required.status_code == 400 and required.json()["error"]["param"] == "tool_choice"
        assert len(executor._llm.received) == 1, "nothing refused reached the engine"
    with pytest.raises(ValueError, match="drop one of them"):
        TrtllmExecutor({"model": "m", "guided_decoding_backend": "xgrammar"}, end_id=1, guided="off")


def test_the_eagle3_recipe_starts_and_constrained_requests_are_served(
    fake_trtllm: Any, encoding: HarmonyEncoding, serve: ServerFactory, caplog: pytest.LogCaptureFixture
) -> None:
    """TensorRT-LLM 1.1+ constrains draft tokens too (PRs #6300, #6948): guided decoding stays on, and says so."""
    eagle3 = {"decoding_type": "Eagle3", "max_draft_len": 3, "speculative_model_dir": "/ckpt/eagle3"}
    executor = executor_for(encoding, speculative_config=eagle3)
    with caplog.at_level("INFO"), serve(executor) as running:
        assert executor._llm.args.guided_decoding_backend == "xgrammar"
        assert executor._llm.args.speculative_config.decoding_type == "Eagle3"
        answer = _post(running, {"input": '{"city": "Oslo"}', "text": JSON_FORMAT})
        assert answer.status_code == 200 and answer.json()["status"] == "completed", answer.text
        assert json.loads(answer.json()["output"][-1]["content"][0]["text"])["city"]
    assert "with Eagle3 one-model speculative decoding" in caplog.text


# -- attention DP: a session stays on its rank ---------------------------------------------------------


def test_a_session_stays_on_its_attention_dp_rank_and_reuses_its_prefix(
    fake_trtllm: Any, encoding: HarmonyEncoding, serve: ServerFactory
) -> None:
    """The throughput profile (attention DP over 2 ranks, a KV cache each) on a release without conversation affinity
    (1.2.0): turns of one session are sent to one rank, relaxed (there while it has room), and the second turn
    reuses the first's blocks there; a request without a session key is
    placed by the engine (round-robin in the fake) and misses the cache on the other rank."""
    executor = executor_for(encoding, tensor_parallel_size=2, enable_attention_dp=True)
    long = "tell me about the tides " * 20
    with serve(executor) as running:
        first = _post(running, {"input": long, "prompt_cache_key": "agent-7", "store": False}).json()
        history = [
            {"role": "user", "content": long},
            *first["output"],
            {"role": "user", "content": "and more"},
        ]
        second = _post(running, {"input": history, "prompt_cache_key": "agent-7", "store": False}).json()
        llm = executor._llm
        params = llm.scheduling[-2:]
        assert all(p is not None and p.attention_dp_relax is True for p in params)
        assert params[0].attention_dp_rank == params[1].attention_dp_rank == llm.ranks[-1] == llm.ranks[-2]
        assert second["usage"]["input_tokens_details"]["cached_tokens"] > 0
        # Without a session key nothing is pinned: the next turn lands on the other rank, and reuses nothing.
        third = _post(running, {"input": long, "store": False}).json()
        fourth = _post(running, {"input": history, "store": False}).json()
        assert llm.scheduling[-1] is None and llm.ranks[-1] != llm.ranks[-2]
        assert (
            third["status"] == "completed" and fourth["usage"]["input_tokens_details"]["cached_tokens"] == 0
        )


def test_attention_dp_ranks_are_the_same_everywhere() -> None:
    ranks = {attention_dp_rank(f"session-{i}", 8) for i in range(200)}
    assert ranks == set(range(8)), "sessions spread over every rank"
    assert attention_dp_rank("agent-7", 8) == attention_dp_rank(
        "agent-7", 8
    )  # no per-process salt (not hash())


def test_without_attention_dp_nothing_is_pinned(
    fake_trtllm: Any, encoding: HarmonyEncoding, serve: ServerFactory
) -> None:
    executor = executor_for(encoding, tensor_parallel_size=2)
    with serve(executor) as running:
        assert _post(running, {"input": "hi", "prompt_cache_key": "k"}).status_code == 200
        assert executor._llm.scheduling[-1] is None


# -- /health follows the engine -----------------------------------------------------------------------


def test_health_is_503_once_the_engine_is_dead(
    fake_trtllm: Any, encoding: HarmonyEncoding, serve: ServerFactory
) -> None:
    executor = executor_for(encoding)
    with serve(executor) as running:
        with httpx.Client(base_url=running.base_url, timeout=30) as client:
            assert client.get("/health").json()["status"] == "ok"
            crashed = client.post("/v1/responses", json={"input": "#crash"}).json()
            assert crashed["status"] == "failed"
            health = client.get("/health")
            assert health.status_code == 503, health.text
            assert (
                health.json()["status"] == "unavailable"
                and health.json()["error"]["code"] == "engine_unavailable"
            )
            after = client.post("/v1/responses", json={"input": "hello"}).json()
            assert after["status"] == "failed", "a dead engine takes no new work"


# -- the fake's argument model, as TensorRT-LLM's ------------------------------------------------------


@pytest.mark.parametrize("name", ["B200-1k1k_tp8_conc64.yaml", "H200-1k1k_tp8_conc2048.yaml"])
def test_nvidias_config_database_files_load_unchanged(
    tmp_path: Path, fake_trtllm: Any, encoding: HarmonyEncoding, name: str
) -> None:
    plan = resolve_launch(str(make_checkpoint(tmp_path)), {}, str(DATA / "trtllm" / "database" / name))
    check_llm_arguments(plan.llm_kwargs, plan.backend)
    llm = fake_trtllm.LLM(**plan.llm_kwargs)
    assert llm.args.env_overrides["TRTLLM_ENABLE_PDL"] == "1"
    assert llm.args.stream_interval == 20 and llm.args.max_seq_len == 2068
    assert llm.args.kv_cache_config.enable_partial_reuse is True  # TensorRT-LLM's default, present
    llm.shutdown()


@pytest.mark.parametrize(
    ("release", "default"), [("1.1.0", "CUTLASS"), ("1.2.0", "AUTO"), ("1.4.0rc1", "AUTO")]
)
def test_the_moe_backend_default_follows_the_release(
    fake_trtllm: Any, monkeypatch: pytest.MonkeyPatch, release: str, default: str
) -> None:
    _play(fake_trtllm, monkeypatch, release)
    from tensorrt_llm.llmapi.llm_args import MoeConfig

    assert MoeConfig().backend == default
    if default == "CUTLASS":
        with pytest.raises(ValueError, match="AUTO"):
            MoeConfig(backend="AUTO")


def test_the_fakes_types_are_tensorrt_llms(fake_trtllm: Any) -> None:
    assert dataclasses.is_dataclass(fake_trtllm.Logprob) and not isinstance(
        fake_trtllm.Logprob(-1.0, 1), tuple
    )
    llm = fake_trtllm.LLM(model="m", max_seq_len=512)
    assert not isinstance(llm.args, dict) and llm.args.max_seq_len == 512  # an object with attributes
    llm.shutdown()


def test_serve_flags(fake_trtllm: Any) -> None:
    args = build_parser().parse_args(
        ["serve", "--guided_decoding", "off", "--unsupported_sampling", "ignore"]
    )
    assert args.guided_decoding == "off" and server_config(args).sampling.unsupported == "ignore"
    defaults = build_parser().parse_args(["serve"])
    assert defaults.guided_decoding == "on" and server_config(defaults).sampling.unsupported == "refuse"
