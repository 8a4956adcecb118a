"""Where the tests find the repository, their data and the fake TensorRT-LLM (one place, so tests can move)."""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent
ROOT = TESTS.parent
PACKAGE = ROOT / "trtllm_responses"
DATA = TESTS / "data"
FAKE_TRTLLM = str(TESTS / "fake_trtllm")
