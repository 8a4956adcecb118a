"""Shared fixtures: the offline Harmony encoding (loaded once) and an adapter with a fixed date."""

from __future__ import annotations

import pytest

from trtllm_responses.harmony import HarmonyAdapter, HarmonyEncoding, load_encoding

FIXED_DATE = "2026-11-21"


@pytest.fixture(scope="session")
def encoding() -> HarmonyEncoding:
    return load_encoding()


@pytest.fixture(scope="session")
def adapter(encoding: HarmonyEncoding) -> HarmonyAdapter:
    return HarmonyAdapter(encoding, today=lambda: FIXED_DATE)
