"""Features as hashed bags: the context for the move network, (slot, span) pairs for the pointer.

Each feature is a string (``"u:refund"``: the user wrote *refund*;
``"done:check_policy"``: that tool has answered) hashed with CRC-32 into a
fixed number of buckets, so the vocabulary never has to be stored. A row is
a dict of bucket -> value, scaled to unit length.
"""

from __future__ import annotations

import itertools
import math
import zlib
from collections import Counter
from collections.abc import Iterable

from ..context import Context
from ._text import Candidate, segment, shape, words

Row = dict[int, float]


def hashed(features: Iterable[str], dim: int) -> Row:
    """Bag of hashed features, L2-normalised."""
    counts = Counter(zlib.crc32(f.encode()) % dim for f in features)
    norm = math.sqrt(sum(v * v for v in counts.values())) or 1.0
    return {i: v / norm for i, v in counts.items()}


def context_features(context: Context) -> list[str]:
    """What the move network reads: the user's words, which tools answered (or failed), the last result."""
    notes = segment(context)
    feats: list[str] = []
    user = words(notes[0].text) if notes else []
    feats += [f"u:{w}" for w in user]
    feats += [f"u2:{a}_{b}" for a, b in itertools.pairwise(user)]
    replies = sum(m.role == "assistant" for m in notes)
    feats.append(f"step:{min(replies, 6)}")
    for m in notes:
        if m.role == "tool":
            feats.append(f"done:{m.name}")
            if m.is_error:
                feats += [f"err:{m.name}", "err"]
    tools = [m for m in notes if m.role == "tool"]
    if tools:
        last = tools[-1]
        feats.append(f"last:{last.name}:{'err' if last.is_error else 'ok'}")
        feats += [f"r:{w}" for w in words(last.text)]
    else:
        feats.append("last:none")
    return feats


def slot_rows(slot: str, cands: list[Candidate], dim: int) -> list[Row]:
    """One row per candidate: its own features, and each crossed with the slot it might fill."""
    ranks = _ranks(cands)
    rows = []
    for c, rank in zip(cands, ranks, strict=True):
        base = _candidate_features(c, rank)
        crossed = [f"{slot}|{f}" for f in base]
        rows.append(hashed(base + crossed + [f"slot:{slot}"], dim))
    return rows


def _candidate_features(c: Candidate, rank: int) -> list[str]:
    s = shape(c.text)
    src = "user" if c.source == "user" else "tool"
    return [
        f"kind:{c.kind}",
        f"shape:{s}",
        f"src:{c.source}",
        f"src:{src}",
        f"src_shape:{src}:{s}",
        f"before:{c.before}",
        f"after:{c.after}",
        f"around:{c.before}_{c.after}",
        f"rank:{min(rank, 4)}",
        f"rank_shape:{min(rank, 4)}:{s}",
        f"pos:{min(c.position, 12)}",
        f"latest:{c.latest}",
        f"len:{min(len(c.text) // 4, 8)}",
        f"num:{c.text.replace('.', '', 1).lstrip('-').isdigit()}",
    ]


def _ranks(cands: list[Candidate]) -> list[int]:
    """Each candidate's order among the candidates of the same source, kind and shape."""
    seen: Counter[tuple[str, str, str]] = Counter()
    out = []
    for c in cands:
        k = (c.source, c.kind, shape(c.text))
        out.append(seen[k])
        seen[k] += 1
    return out
