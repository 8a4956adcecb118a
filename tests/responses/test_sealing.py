"""Encrypted content, pure: round trips, the kind is authenticated, other keys and edits are refused."""

from __future__ import annotations

import subprocess
import sys
import zlib

import orjson
import pytest

from trtllm_responses.core.errors import InvalidRequestError
from trtllm_responses.responses.sealing import (
    SUMMARY_PREFIX,
    TOOL_READ,
    TOOL_READ_MAX_BYTES,
    TOOL_READ_PREFIX,
    ContentSealer,
    is_tool_read,
    load_key,
    unseal_items,
)

SEALER = ContentSealer(b"s" * 32)


def test_round_trip_and_fresh_nonces() -> None:
    a, b = SEALER.seal_reasoning("think"), SEALER.seal_reasoning("think")
    assert a != b and a.startswith("v1.")
    assert SEALER.open("reasoning", a, "x") == {"text": "think"}


def test_the_kind_is_authenticated() -> None:
    summary = SEALER.seal_summary("all done")
    with pytest.raises(InvalidRequestError) as bad:
        unseal_items([{"type": "reasoning", "encrypted_content": summary}], SEALER)
    assert bad.value.code == "invalid_encrypted_content" and bad.value.param == "input[0].encrypted_content"


def test_another_key_is_refused() -> None:
    blob = ContentSealer(b"o" * 32).seal_reasoning("x")
    with pytest.raises(InvalidRequestError):
        SEALER.open("reasoning", blob, "input[0].encrypted_content")


@pytest.mark.parametrize("blob", [None, 3, "", "v1.", "v1.!!!", "v2." + "A" * 40, "v1." + "A" * 8])
def test_malformed_blobs_are_400_not_500(blob: object) -> None:
    with pytest.raises(InvalidRequestError):
        SEALER.open("reasoning", blob, "p")


def test_unseal_items_opens_what_is_sealed_and_nothing_else() -> None:
    plain = [{"role": "user", "content": "hi"}, {"type": "reasoning", "summary": [], "content": None}]
    assert unseal_items(plain, SEALER) is plain  # nothing to open: no copy
    items = [
        {"type": "compaction", "id": "cmp_1", "encrypted_content": SEALER.seal_summary("S")},
        {"type": "reasoning", "summary": [], "encrypted_content": SEALER.seal_reasoning("R")},
    ]
    opened = unseal_items(items, SEALER)
    assert opened[0] == {
        "type": "message",
        "role": "user",
        "content": [{"type": "input_text", "text": SUMMARY_PREFIX + "S"}],
    }
    assert opened[1]["content"] == [{"type": "reasoning_text", "text": "R"}]
    assert items[1].get("content") is None  # the caller's items are not changed


# -- tool reads (the carriers of server-run tool items' read fields) ----------------------------

PAGE = {"url": "http://h/x", "title": "X", "text": "Tides are the rise and fall of sea levels.\n" * 2000}
READ = {"model_read": "[1] X\n" + PAGE["text"][:4000], "browser_page": PAGE}


def _open(blob: str) -> tuple[str, dict[str, object]]:
    return SEALER.open_tool_read(blob, "input[3].encrypted_content")


def test_tool_read_round_trip_compressed() -> None:
    blob = SEALER.seal_tool_read("web_search_call", READ)
    assert (
        blob is not None
        and blob.startswith("v1z.")
        and is_tool_read({"type": "reasoning", "encrypted_content": blob})
    )
    assert _open(blob) == ("web_search_call", READ)
    plain = len(orjson.dumps({"type": "web_search_call", "fields": READ}))
    assert len(blob) < plain / 10, "page text is compressed before it is sealed"
    assert SEALER.seal_tool_read("web_search_call", READ) != blob, "fresh nonce"


def test_reasoning_text_is_not_compressed() -> None:
    text = "a" * 10_000
    assert len(SEALER.seal_reasoning(text)) > len(text)


def test_tool_read_size_bound_both_ways() -> None:
    big = {"model_read": "x" * (TOOL_READ_MAX_BYTES + 1)}
    assert SEALER.seal_tool_read("web_search_call", big) is None, "over the bound: no carrier"
    # A blob that decompresses past the bound (a zlib bomb sealed with our key) is refused, not inflated.
    bomb = zlib.compress(orjson.dumps({"type": "web_search_call", "fields": big}), 9)
    blob = SEALER._seal_bytes(TOOL_READ, bomb, TOOL_READ_PREFIX)
    assert len(blob) < 20_000
    with pytest.raises(InvalidRequestError) as bad:
        _open(blob)
    assert bad.value.code == "invalid_encrypted_content" and bad.value.param == "input[3].encrypted_content"


def test_tool_read_kind_confusion_is_refused() -> None:
    blob = SEALER.seal_tool_read("web_search_call", READ)
    assert blob is not None
    reasoning, summary = SEALER.seal_reasoning("think"), SEALER.seal_summary("done")
    for forged in (
        "v1." + blob[4:],  # a tool read opened as reasoning
        TOOL_READ_PREFIX + reasoning[3:],  # reasoning opened as a tool read
        TOOL_READ_PREFIX + summary[3:],
        blob[:-8] + "AAAAAAAA",  # altered
        ContentSealer(b"o" * 32).seal_tool_read("web_search_call", READ),  # another key
    ):
        with pytest.raises(InvalidRequestError) as bad:
            unseal_items([{"type": "reasoning", "summary": [], "encrypted_content": forged}], SEALER)
        assert bad.value.code == "invalid_encrypted_content", forged[:8]
    with pytest.raises(InvalidRequestError):  # a compaction item carrying a tool read
        unseal_items([{"type": "compaction", "encrypted_content": blob}], SEALER)


def test_unseal_items_merges_a_carrier_into_the_item_before_it() -> None:
    blob = SEALER.seal_tool_read("web_search_call", READ)
    call = {"type": "web_search_call", "status": "completed", "action": {"type": "search", "query": "tides"}}
    carrier = {"type": "reasoning", "summary": [], "encrypted_content": blob}
    user = {"role": "user", "content": "hi"}
    opened = unseal_items([user, call, carrier, user], SEALER)
    assert opened == [user, {**call, **READ}, {"type": "reasoning", "summary": []}, user], "positions kept"
    # After another item type (the call was dropped), or after another carrier: it reads as nothing.
    nothing = {"type": "reasoning", "summary": []}
    assert unseal_items([user, carrier], SEALER) == [user, nothing]
    assert unseal_items([carrier], SEALER) == [nothing]
    assert unseal_items([call, carrier, carrier], SEALER) == [{**call, **READ}, nothing, nothing]
    python = {"type": "code_interpreter_call", "code": "print(1)", "outputs": None}
    assert unseal_items([python, carrier], SEALER)[0] == python, "sealed for another item type"


def test_processes_starting_together_share_one_whole_key(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Servers starting at once (the frontends of a group, the suite's workers) with no key yet: each reads the
    one key made, whole (it is linked into place once written), and nothing is left beside it."""
    monkeypatch.delenv("TRTLLM_RESPONSES_ENCRYPTION_KEY", raising=False)
    monkeypatch.setenv("TRTLLM_RESPONSES_CACHE", str(tmp_path))
    code = "from trtllm_responses.responses.sealing import load_key; print(load_key().hex())"
    starters = [
        subprocess.Popen(
            [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(4)
    ]
    answers = [starter.communicate(timeout=120) for starter in starters]
    assert all(starter.returncode == 0 for starter in starters), [err for _, err in answers]
    assert len({out for out, _ in answers}) == 1
    assert load_key() == bytes.fromhex(answers[0][0].strip())
    assert [p.name for p in tmp_path.iterdir()] == ["encryption.key"]
    assert (tmp_path / "encryption.key").stat().st_mode & 0o777 == 0o600


# -- tenants and kinds (docs/tenants.md#sealed-content-kv-prefixes-and-caches) -----------------------------


def _legacy_blob(key: bytes, kind: str, payload: dict[str, str]) -> str:
    """A blob as sealed before tenants existed: associated data ``trtllm-responses/v1/<kind>``."""
    import base64
    import secrets

    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    nonce = secrets.token_bytes(12)
    sealed = AESGCM(key).encrypt(nonce, orjson.dumps(payload), b"trtllm-responses/v1/" + kind.encode())
    return "v1." + base64.urlsafe_b64encode(nonce + sealed).decode()


def test_a_blob_opens_only_for_the_tenant_and_kind_it_was_sealed_for() -> None:
    a, b = SEALER.bound("a/"), SEALER.bound("b/")
    assert SEALER.bound("a/") is a and SEALER.bound("", False) is SEALER  # one sealer per tenant and API
    for sealer in (SEALER, a, b, a.bound("a/", thinking=True)):
        assert sealer.open(sealer.reasoning_kind, sealer.seal_reasoning("t"), "p") == {"text": "t"}
    blob = a.seal_reasoning("secret")
    for other in (b, SEALER):
        with pytest.raises(InvalidRequestError) as refused:
            other.open("reasoning", blob, "input[0].encrypted_content")
        assert refused.value.code == "invalid_encrypted_content"
    with pytest.raises(InvalidRequestError):
        a.bound("a/", thinking=True).open("thinking", blob, "p")  # a Responses blob is no signature
    signature = SEALER.bound("", thinking=True).seal_reasoning("hidden")
    with pytest.raises(InvalidRequestError):
        unseal_items([{"type": "reasoning", "encrypted_content": signature}], SEALER)  # nor the reverse
    summary = a.seal_summary("S")
    assert unseal_items([{"type": "compaction", "encrypted_content": summary}], a)[0]["role"] == "user"
    with pytest.raises(InvalidRequestError):
        unseal_items([{"type": "compaction", "encrypted_content": summary}], b)


def test_blobs_sealed_before_tenants_open_for_the_unscoped_tenant_alone() -> None:
    """A server with one key or none keeps opening what it sealed before (then a thinking signature was a
    reasoning blob: it opens as either, as it did); no scoped tenant opens them."""
    key = b"s" * 32
    old = _legacy_blob(key, "reasoning", {"text": "before"})
    assert SEALER.open("reasoning", old, "p") == {"text": "before"}
    assert SEALER.bound("", thinking=True).open("thinking", old, "p") == {"text": "before"}
    old_summary = _legacy_blob(key, "compaction", {"summary": "S"})
    assert SEALER.open("compaction", old_summary, "p") == {"summary": "S"}
    with pytest.raises(InvalidRequestError):
        SEALER.open("reasoning", old_summary, "p")  # the kinds were bound then already
    for scoped in (SEALER.bound("a/"), SEALER.bound("a/", thinking=True)):
        with pytest.raises(InvalidRequestError):
            scoped.open(scoped.reasoning_kind, old, "p")
