"""Where ``serve`` runs among many GPUs and nodes, read once at start from the launcher's environment.

TensorRT-LLM runs a model over several GPUs (tensor, pipeline, expert parallelism) as one MPI world.
On one node the LLM API spawns its own workers (``MpiPoolSession``): nothing to do. Across nodes, or
under a scheduler, the world comes from ``mpirun``/``srun`` and ``trtllm-llmapi-launch`` splits it
(``tensorrt_llm/llmapi/trtllm-llmapi-launch``): rank 0 runs the given command, here the HTTP server,
with the MPI variables removed and ``TLLM_SPAWN_PROXY_PROCESS=1``, ``tllm_mpi_size=N`` set; every
other rank runs ``tensorrt_llm.llmapi.mgmn_worker_node``. So exactly one process serves HTTP.

What the server does differently there, checked before any model loads (LaunchError otherwise):

- started by ``mpirun``/``srun`` on several ranks *without* the launcher (``OMPI_COMM_WORLD_SIZE``,
  ``SLURM_STEP_NUM_TASKS``, ``PMI_SIZE`` > 1 and no ``TLLM_SPAWN_PROXY_PROCESS``), every rank would start an
  HTTP server and its own LLM: refused, with the command that works. ``SLURM_NTASKS`` alone is not such a
  launch: ``sbatch --ntasks=8`` sets it in the one process that runs the batch script, and only ``srun`` (a
  job step) starts tasks, each with ``SLURM_STEP_NUM_TASKS`` (Slurm's srun(1) and sbatch(1) "OUTPUT
  ENVIRONMENT VARIABLES");
- under the launcher, the world must hold the model's ranks: ``tllm_mpi_size`` equals
  ``tensor_parallel_size × pipeline_parallel_size × context_parallel_size``;
- the Ray orchestrator (``orchestrator_type: ray``) starts its own workers in a Ray cluster: refused
  under MPI, where they would be started twice.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .launch import LaunchError

__all__ = ["World", "check_world", "read_world"]

_SIZE_VARIABLES = ("OMPI_COMM_WORLD_SIZE", "SLURM_STEP_NUM_TASKS", "PMI_SIZE")
_RANK_VARIABLES = ("OMPI_COMM_WORLD_RANK", "SLURM_PROCID", "PMI_RANK")


@dataclass(frozen=True, slots=True)
class World:
    """The process world ``serve`` was started in."""

    launcher: bool  # under trtllm-llmapi-launch (rank 0, MPI variables removed)
    size: int  # ranks in the world (1: a single process)
    rank: int | None  # this process's rank when started by mpirun/srun directly


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def read_world(environ: Mapping[str, str]) -> World:
    """The world as the environment describes it (read once, at start)."""
    if environ.get("TLLM_SPAWN_PROXY_PROCESS") == "1":
        return World(launcher=True, size=_int(environ.get("tllm_mpi_size")) or 1, rank=0)
    size = next((n for n in (_int(environ.get(v)) for v in _SIZE_VARIABLES) if n is not None), 1)
    ranks = _RANK_VARIABLES if "SLURM_STEP_NUM_TASKS" in environ else ("OMPI_COMM_WORLD_RANK", "PMI_RANK")
    rank = next((n for n in (_int(environ.get(v)) for v in ranks) if n is not None), None)
    return World(launcher=False, size=size, rank=rank)


def check_world(world: World, llm_kwargs: Mapping[str, Any]) -> None:
    """Refuse a launch this world cannot serve (see the module docstring); a no-op for one process."""
    ray = llm_kwargs.get("orchestrator_type") == "ray"
    if world.launcher or world.size > 1:
        if ray:
            raise LaunchError(
                "orchestrator_type: ray starts TensorRT-LLM's workers in a Ray cluster; start `trtllm-responses serve` "
                "once, on the Ray head node, not under mpirun/srun or trtllm-llmapi-launch (docs/serving-on-tensorrt-llm.md#many-gpus-and-nodes)"
            )
    if not world.launcher and world.size > 1:
        raise LaunchError(
            f"started by mpirun/srun as rank {world.rank} of {world.size}: every rank would serve HTTP and load its own "
            f"model. Start it as `mpirun -n {world.size} trtllm-llmapi-launch trtllm-responses serve ...` (srun likewise): "
            "rank 0 serves HTTP, the other ranks run TensorRT-LLM's workers (docs/serving-on-tensorrt-llm.md#many-gpus-and-nodes)"
        )
    if world.launcher:
        ranks = 1
        for key in ("tensor_parallel_size", "pipeline_parallel_size", "context_parallel_size"):
            value = llm_kwargs.get(key) or 1
            ranks *= int(value)
        if ranks != world.size:
            raise LaunchError(
                f"trtllm-llmapi-launch started {world.size} rank(s), but the model needs {ranks} "
                "(tensor_parallel_size × pipeline_parallel_size × context_parallel_size): start as many ranks as that"
            )
