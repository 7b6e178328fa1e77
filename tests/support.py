"""Helpers shared by the whole suite (``tests/`` is on the path: ``from support import add``)."""

from __future__ import annotations

from hypothesis import strategies as st

from tether import tool
from tether.parts import File, Image, Text


@tool(effect="none")
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: the first number.
        b: the second number.
    """
    return a + b


@tool(effect="none", name="add")
def add_numbers(a: float, b: float) -> float:
    """Add two numbers.

    Args:
        a: the first number.
        b: the second number.
    """
    return a + b


# Random parts, for property tests of notes that hold images and files.
_images = st.builds(Image, st.binary(max_size=64), st.sampled_from(("image/jpeg", "image/png", "image/webp")))
_files = st.builds(
    File, st.binary(max_size=64), st.sampled_from(("application/pdf", "text/plain")), st.text(max_size=20)
)
_links = st.builds(lambda n: Image(url=f"https://example.com/{n}.png"), st.integers(0, 99))
parts = st.lists(st.one_of(st.builds(Text, st.text(max_size=30)), _images, _files, _links), min_size=1, max_size=5)
