"""The tenants of a server (``tenants/directory.py``, docs/tenants.md#the-tenants-file): the file's rules,
how a request's key names its tenant, and the swap on reload."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from trtllm_responses.tenants import OPEN, Tenant, TenantDirectory, TenantFileError, Tenants, hash_key

KEY_A, KEY_B = "sk-team-a-0123", "sk-team-b-4567"


def table(**tenants: dict[str, Any]) -> dict[str, Any]:
    return {"tenants": tenants}


def bearer(key: str) -> list[tuple[bytes, bytes]]:
    return [(b"authorization", b"Bearer " + key.encode())]


def test_a_key_names_its_tenant_by_bearer_or_anthropics_header() -> None:
    tenants = Tenants.of_data(
        table(
            a={"keys": [hash_key(KEY_A)], "requests_per_minute": 5},
            b={"keys": [hash_key(KEY_B)], "admin": True},
        )
    )
    a = tenants.identify(bearer(KEY_A))
    assert a is not None and a.name == "a" and a.limits.requests_per_minute == 5 and not a.admin
    assert a.scope == "a/" and a.salt == "tenant:a"
    b = tenants.identify([(b"x-api-key", KEY_B.encode())])
    assert b is not None and b.name == "b" and b.admin
    assert tenants.identify(bearer("sk-wrong")) is None
    assert tenants.identify([(b"authorization", b"Basic " + KEY_A.encode())]) is None  # only Bearer
    assert tenants.identify([]) is None
    assert not tenants.open


def test_without_keys_every_request_is_the_open_tenant_and_one_key_is_one_admin() -> None:
    assert Tenants.of_open().identify([]) is OPEN
    assert OPEN.scope == "" and OPEN.admin and OPEN.salt is None
    one = Tenants.of_key(KEY_A)
    tenant = one.identify(bearer(KEY_A))
    assert (
        tenant is not None and tenant.admin and tenant.scope == ""
    )  # what it stored before is its own still
    assert one.identify(bearer(KEY_B)) is None


@pytest.mark.parametrize(
    ("entry", "says"),
    [
        ({"keys": [KEY_A]}, 'not a "sha256:<64 lower-case hex>" digest'),
        ({"keys": ["sha256:" + "A" * 64]}, "digest"),  # upper-case hex is not what hash_key writes
        ({"keys": hash_key(KEY_A)}, "'keys' must be a list"),
        ({"keys": [], "requests_per_minute": 0}, "'requests_per_minute' must be a positive integer"),
        ({"keys": [], "tokens_per_minute": True}, "'tokens_per_minute' must be a positive integer"),
        ({"keys": [], "admin": "yes"}, "'admin' must be true or false"),
        ({"keys": [], "priority": "ultrafast"}, "'priority' must be one of flex, default, priority"),
        ({"keys": [], "weight": 0}, "'weight' must be a number in (0, 1000]"),
        ({"keys": [], "cache_salt": ""}, "'cache_salt' must be a string"),
        ({"keys": [], "rpm": 5}, "unknown field(s) 'rpm'"),
    ],
)
def test_a_file_not_as_documented_is_refused_saying_where(entry: dict[str, Any], says: str) -> None:
    with pytest.raises(TenantFileError) as refused:
        Tenants.of_data(table(a=entry))
    assert "tenant 'a'" in str(refused.value) and says in str(refused.value)
    assert KEY_A not in str(refused.value)  # a plain key put in the file by mistake is never echoed


def test_one_key_for_two_tenants_and_bad_names_are_refused() -> None:
    with pytest.raises(TenantFileError, match="belongs to both 'a' and 'b'"):
        Tenants.of_data(table(a={"keys": [hash_key(KEY_A)]}, b={"keys": [hash_key(KEY_A)]}))
    with pytest.raises(TenantFileError, match="tenant name 'a/b'"):
        Tenants.of_data(table(**{"a/b": {"keys": []}}))
    with pytest.raises(TenantFileError, match="expected"):
        Tenants.of_data({"a": {"keys": []}})


def test_a_tenant_is_served_at_most_at_its_priority() -> None:
    tenant = Tenant("a", priority="default")
    assert tenant.tier("priority") == "default"
    assert tenant.tier("flex") == "flex" and tenant.tier("default") == "default"
    assert Tenant("b", priority="priority").tier("priority") == "priority"
    assert Tenant("c", priority="flex").tier("default") == "flex"


def test_json_and_toml_files_read_alike(tmp_path: Path) -> None:
    as_json = tmp_path / "tenants.json"
    as_json.write_text(json.dumps(table(a={"keys": [hash_key(KEY_A)], "weight": 2})))
    as_toml = tmp_path / "tenants.toml"
    as_toml.write_text(f'[tenants.a]\nkeys = ["{hash_key(KEY_A)}"]\nweight = 2\n')
    for path in (as_json, as_toml):
        tenant = Tenants.of_file(path).identify(bearer(KEY_A))
        assert tenant is not None and tenant.weight == 2.0
    (tmp_path / "broken.json").write_text("{")
    with pytest.raises(TenantFileError, match="not valid JSON"):
        Tenants.of_file(tmp_path / "broken.json")
    with pytest.raises(TenantFileError, match="missing.json"):
        Tenants.of_file(tmp_path / "missing.json")


def test_api_key_and_tenants_are_exclusive(tmp_path: Path) -> None:
    path = tmp_path / "tenants.json"
    path.write_text(json.dumps(table(a={"keys": [hash_key(KEY_A)]})))
    with pytest.raises(TenantFileError, match="exclusive"):
        TenantDirectory.configured(api_key=KEY_B, tenants_file=str(path))
    assert TenantDirectory.configured().open
    assert not TenantDirectory.configured(api_key=KEY_B).open


def test_reload_swaps_the_table_and_a_broken_file_keeps_the_old(tmp_path: Path) -> None:
    path = tmp_path / "tenants.json"
    path.write_text(json.dumps(table(a={"keys": [hash_key(KEY_A)]})))
    directory = TenantDirectory.configured(tenants_file=str(path))
    before = directory.identify(bearer(KEY_A))
    assert before is not None and directory.identify(bearer(KEY_B)) is None
    path.write_text(json.dumps(table(b={"keys": [hash_key(KEY_B)]})))
    assert directory.reload()
    assert directory.identify(bearer(KEY_A)) is None  # a key removed is refused
    assert directory.identify(bearer(KEY_B)) is not None  # a key added works
    assert before.name == "a"  # a request identified before keeps its tenant
    path.write_text("{not json")
    assert not directory.reload()
    assert directory.identify(bearer(KEY_B)) is not None
    assert not TenantDirectory.configured().reload()  # nothing to read again


def test_hash_key_reads_the_key_from_stdin_never_argv() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "trtllm_responses.cli", "hash-key"],
        input=KEY_A + "\n",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == hash_key(KEY_A)
    empty = subprocess.run(
        [sys.executable, "-m", "trtllm_responses.cli", "hash-key"],
        input="",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert empty.returncode == 2 and "no key on stdin" in empty.stderr
