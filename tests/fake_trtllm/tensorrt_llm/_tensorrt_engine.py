"""TensorRT-engine LLM (tensorrt_llm._tensorrt_engine.LLM), faked: builds 'engines' by writing a file.

Gone from 1.3 (NVIDIA/TensorRT-LLM PRs #15763, #15918): importing it there fails as a missing module does.
"""

from __future__ import annotations

from ._release import has_tensorrt_backend, version

if not has_tensorrt_backend():
    raise ModuleNotFoundError(
        f"No module named 'tensorrt_llm._tensorrt_engine' (TensorRT-LLM {version()})", name=__name__
    )

import json
from pathlib import Path
from typing import Any

from .llmapi.llm import LLM as _TorchLLM
from .llmapi.llm_args import TrtLlmArgs


class LLM:
    def __init__(self, model: str, **kwargs: Any) -> None:
        self.args = TrtLlmArgs(model=model, **kwargs)
        _TorchLLM._log({"event": "trt_init", "args": self.args.model_dump(mode="json", exclude_unset=True)})

    def save(self, engine_dir: str) -> None:
        path = Path(engine_dir)
        path.mkdir(parents=True, exist_ok=True)
        (path / "rank0.engine").write_bytes(b"fake engine")
        (path / "config.json").write_text(json.dumps(self.args.model_dump(mode="json", exclude_unset=True)))

    def shutdown(self) -> None:
        pass
