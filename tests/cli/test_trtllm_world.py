"""Many GPUs and nodes: what `serve --engine trtllm` does under mpirun/srun, trtllm-llmapi-launch and Ray.

The environment is the one trtllm-llmapi-launch gives rank 0 (tensorrt_llm/llmapi/trtllm-llmapi-launch:
MPI variables removed, TLLM_SPAWN_PROXY_PROCESS=1, tllm_mpi_size=N) or mpirun/srun give every rank.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
import yaml
from support.checkpoints import make_checkpoint
from support.paths import FAKE_TRTLLM
from support.server_harness import stream_events
from support.stream_grammar import check_stream
from support.trtllm_harness import Served

from trtllm_responses.cli.launch import LaunchError
from trtllm_responses.cli.world import World, check_world, read_world

LAUNCHER = {"TLLM_SPAWN_PROXY_PROCESS": "1", "TLLM_SPAWN_PROXY_PROCESS_IPC_ADDR": "tcp://127.0.0.1:10012"}


def _serve_refused(tmp_path: Path, args: list[str], env: dict[str, str]) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "trtllm_responses.cli", "serve", str(make_checkpoint(tmp_path)), "--engine", "trtllm", *args],
        capture_output=True, text=True, timeout=120,
        env={**os.environ, "PYTHONPATH": FAKE_TRTLLM, **env},
    )  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    return done.stderr


def test_the_world_is_read_from_the_environment() -> None:
    assert read_world({}) == World(launcher=False, size=1, rank=None)
    assert read_world({**LAUNCHER, "tllm_mpi_size": "8"}) == World(launcher=True, size=8, rank=0)
    assert read_world({"OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_RANK": "2"}) == World(False, 4, 2)
    # srun starts 16 tasks of a job step: each sees the step's size.
    assert read_world({"SLURM_NTASKS": "16", "SLURM_STEP_NUM_TASKS": "16", "SLURM_PROCID": "3"}) == World(
        False, 16, 3
    )
    # sbatch --ntasks=8 runs the batch script once: SLURM_NTASKS is the allocation, not a world of 8 processes.
    batch = {"SLURM_JOB_ID": "42", "SLURM_NTASKS": "8", "SLURM_NPROCS": "8", "SLURM_PROCID": "0"}
    assert read_world(batch) == World(False, 1, None)
    check_world(read_world(batch), {"tensor_parallel_size": 8})  # one process: the LLM API spawns its workers
    check_world(World(False, 1, 0), {"tensor_parallel_size": 8})  # mpirun -n 1: one process, fine
    with pytest.raises(LaunchError, match="orchestrator_type: ray"):
        check_world(World(True, 2, 0), {"tensor_parallel_size": 2, "orchestrator_type": "ray"})


def test_under_the_launcher_rank_0_serves_http_for_the_world(tmp_path: Path) -> None:
    served = Served(
        [
            str(make_checkpoint(tmp_path)),
            "--engine",
            "trtllm",
            "--tp_size",
            "4",
            "--pp_size",
            "2",
            "--ep_size",
            "4",
        ],
        tmp_path / "log",
        {**LAUNCHER, "tllm_mpi_size": "8"},
    )
    try:
        [init] = served.records("init")
        assert init["env"] == {"TLLM_SPAWN_PROXY_PROCESS": "1", "tllm_mpi_size": "8"}, (
            "the LLM is built under the launcher"
        )
        args = init["args"]
        assert (
            args["tensor_parallel_size"],
            args["pipeline_parallel_size"],
            args["moe_expert_parallel_size"],
        ) == (4, 2, 4)
        with httpx.Client(base_url=served.url, timeout=30) as client:
            assert check_stream(stream_events(client, {"input": "eight GPUs"}))["status"] == "completed"
    finally:
        served.stop()


def test_mpirun_without_the_launcher_is_refused(tmp_path: Path) -> None:
    err = _serve_refused(
        tmp_path, ["--tp_size", "2"], {"OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_RANK": "1"}
    )
    assert (
        "rank 1 of 2: every rank would serve HTTP" in err
        and "mpirun -n 2 trtllm-llmapi-launch trtllm-responses serve" in err
    )


def test_the_launchers_world_must_fit_the_model(tmp_path: Path) -> None:
    err = _serve_refused(tmp_path, ["--tp_size", "2"], {**LAUNCHER, "tllm_mpi_size": "4"})
    assert "started 4 rank(s), but the model needs 2" in err


def test_ray_orchestrator_runs_once_outside_mpi(tmp_path: Path) -> None:
    extra = tmp_path / "ray.yaml"
    extra.write_text(yaml.safe_dump({"orchestrator_type": "ray"}))
    err = _serve_refused(
        tmp_path,
        ["--tp_size", "2", "--extra_llm_api_options", str(extra)],
        {**LAUNCHER, "tllm_mpi_size": "2"},
    )
    assert "orchestrator_type: ray" in err
    served = Served(
        [str(make_checkpoint(tmp_path / "b")), "--tp_size", "2", "--extra_llm_api_options", str(extra)],
        tmp_path / "log",
    )
    try:
        [init] = served.records("init")
        assert init["args"]["orchestrator_type"] == "ray" and init["env"] == {}
    finally:
        served.stop()
