"""API key file parsing, constant-time lookup and rotation."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from featurestream.api.auth import KeyFileError, KeyRing, bearer_token, hash_key, parse_keys


def write(path: Path, text: str, bump: int = 0) -> None:
    path.write_text(text)
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + bump))


def test_hash_is_sha256_hex() -> None:
    assert hash_key("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"


def test_parse_skips_comments_and_blank_lines() -> None:
    text = f"# team keys\n\nacme:{hash_key('k1')}\n  beta : {hash_key('k2').upper()}  \n"
    assert [t for t, _ in parse_keys(text)] == ["acme", "beta"]


@pytest.mark.parametrize(
    "line",
    [
        "acme",
        f"acme {hash_key('x')}",
        "acme:1234",
        f"bad tenant:{hash_key('x')}",
        f":{hash_key('x')}",
    ],
)
def test_parse_rejects_malformed_lines_with_their_number(line: str) -> None:
    with pytest.raises(KeyFileError, match=":2:"):
        parse_keys(f"# ok\n{line}\n", "keys.txt")


def test_lookup_maps_keys_to_tenants(tmp_path: Path) -> None:
    f = tmp_path / "keys"
    write(f, f"acme:{hash_key('k1')}\nbeta:{hash_key('k2')}\nacme:{hash_key('k3')}\n")
    ring = KeyRing.from_file(f)
    assert ring.enabled
    assert ring.tenant_for("k1") == "acme" and ring.tenant_for("k3") == "acme"
    assert ring.tenant_for("k2") == "beta"
    assert ring.tenant_for("nope") is None and ring.tenant_for("") is None
    assert ring.tenant_for(None) is None


def test_rotation_by_file_change(tmp_path: Path) -> None:
    f = tmp_path / "keys"
    write(f, f"acme:{hash_key('old')}\n")
    ring = KeyRing.from_file(f)
    write(f, f"acme:{hash_key('new')}\n", bump=10**9)
    ring.maybe_reload(now=ring._checked)  # within the same second: not re-read yet
    assert ring.tenant_for("old") == "acme"
    ring.maybe_reload(now=ring._checked + 2)
    assert ring.tenant_for("new") == "acme" and ring.tenant_for("old") is None


def test_a_broken_file_on_reload_keeps_the_previous_keys(tmp_path: Path) -> None:
    f = tmp_path / "keys"
    write(f, f"acme:{hash_key('k')}\n")
    ring = KeyRing.from_file(f)
    write(f, "garbage\n", bump=10**9)
    ring.reload()
    assert ring.tenant_for("k") == "acme"
    with pytest.raises(KeyFileError):
        KeyRing.from_file(f)
    with pytest.raises(KeyFileError):
        KeyRing.from_file(tmp_path / "missing")


@pytest.mark.parametrize(
    ("header", "token"),
    [
        ("Bearer abc", "abc"),
        ("bearer  abc ", "abc"),
        ("Basic abc", None),
        ("Bearer ", None),
        (None, None),
        ("abc", None),
    ],
)
def test_bearer_token(header: str | None, token: str | None) -> None:
    assert bearer_token(header) == token
