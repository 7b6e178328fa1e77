"""Reading a brain file's arrays with bounded memory: a hostile file is refused, never inflated.

A saved brain is a zip of ``.npy`` arrays. Handed to ``numpy.load`` as is, a
file of half a megabyte can inflate to half a gigabyte (zeros compress about a
thousandfold), and an array header can claim gigabytes that numpy sets aside
before it reads a byte. Here the sizes the zip declares are summed first, each
member is read up to its declared size (``zipfile`` stops there, and checks its
CRC), and each array's header must fit the bytes that follow it.
"""

from __future__ import annotations

import io
import zipfile
from pathlib import Path
from typing import Any

from ..exceptions import UserError

MAX_BRAIN_BYTES = 64 * 2**20
"""The most a brain file may hold once decompressed (the example brains hold well under 1 MB)."""


def load_arrays(path: str | Path, np: Any, cap: int = MAX_BRAIN_BYTES) -> dict[str, Any]:
    """The named arrays of the ``.npz`` file at ``path``; ``UserError`` for anything else, or too big."""
    try:
        with zipfile.ZipFile(path) as z:
            members = z.infolist()
            inflated = sum(m.file_size for m in members)
            if inflated > cap:
                raise UserError(
                    f"{str(path)!r} would decompress to {inflated:,} bytes; a brain file holds at most {cap:,}"
                )
            return {m.filename.removesuffix(".npy"): _array(z, m, np) for m in members}
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
        raise UserError(f"{str(path)!r} is not a saved tether brain: {exc}") from None


def _array(z: zipfile.ZipFile, member: zipfile.ZipInfo, np: Any) -> Any:
    with z.open(member) as f:
        raw = f.read(member.file_size + 1)  # zipfile yields no more than the declared size
    buf = io.BytesIO(raw)
    version = np.lib.format.read_magic(buf)
    read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
    shape, _, dtype = read_header(buf)
    if dtype.hasobject:
        raise ValueError(f"{member.filename} holds Python objects")
    size = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize if shape else dtype.itemsize
    if size > len(raw) - buf.tell():
        raise ValueError(f"{member.filename} claims {size:,} bytes of data and holds {len(raw) - buf.tell():,}")
    buf.seek(0)
    return np.load(buf, allow_pickle=False)
