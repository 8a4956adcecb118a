"""TensorRT-engine LLM (tensorrt_llm._tensorrt_engine.LLM), faked: builds 'engines' by writing a file."""

from __future__ import annotations

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
