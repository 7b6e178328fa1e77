"""Image.from_path and File.from_path read regular files only, and never more than one byte past the cap."""

from __future__ import annotations

import os
import threading
import tracemalloc

import pytest

from tether.parts import MAX_PART_BYTES, File, Image

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("kind", [Image, File])
def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path, kind) -> None:
    fifo = tmp_path / "pipe.png"
    os.mkfifo(fifo)
    out: dict[str, BaseException | object] = {}

    def read() -> None:
        try:
            out["part"] = kind.from_path(fifo)
        except BaseException as exc:
            out["error"] = exc

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(10)  # a guard against hanging the suite, not a timing check
    if reader.is_alive():
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))  # let it go
        reader.join(30)
        pytest.fail("from_path blocked on a FIFO with no writer")
    assert isinstance(out.get("error"), ValueError) and "not a regular file" in str(out["error"])


@pytest.mark.parametrize("kind", [Image, File])
def test_a_directory_is_refused(tmp_path, kind) -> None:
    with pytest.raises(ValueError, match="not a regular file"):
        kind.from_path(tmp_path)


@pytest.mark.parametrize("kind", [Image, File])
def test_a_file_over_the_cap_is_refused_without_reading_it(tmp_path, kind) -> None:
    big = tmp_path / "big.png"
    with open(big, "wb") as f:
        f.write(PNG)
        f.truncate(MAX_PART_BYTES * 20)  # sparse: 200 MiB on paper
    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match="over the part cap"):
            kind.from_path(big)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < MAX_PART_BYTES


def test_a_file_at_the_cap_is_read_whole(tmp_path) -> None:
    path = tmp_path / "shot.png"
    path.write_bytes(PNG + bytes(MAX_PART_BYTES - len(PNG)))
    shot = Image.from_path(path)
    assert (len(shot), shot.media_type) == (MAX_PART_BYTES, "image/png")
    doc = File.from_path(path)
    assert (doc.name, doc.data) == ("shot.png", shot.data)
