"""The map of the code, written once: the parts, the arrows between them, and the core's data flow.

Every ``import`` in ``src/tether`` counts, at module level, inside functions and
under ``TYPE_CHECKING`` alike: Core imports only Core; Brains, Stores,
Toolkits, Patterns and Observability import only Core; Scale imports Core and
Stores; Evaluation everything but the Faces; Faces import anything. The core
imports in the order its data flows (:data:`FLOW`), and its private packages
(``_loop``, ``_schema``) are reached from the core only. docs/architecture.md
shows this map and ``test_the_architecture_page_shows_this_map`` keeps it so.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "tether"

FLOW = [
    "exceptions",
    "_schema.strictjson", "_schema.docstrings", "_schema.signature", "_schema.check", "_schema.notes",
    "parts", "messages", "cost", "context", "tools", "policy", "pending", "state", "events", "output",
    "grounding", "journal", "leases", "store",
    "_loop.streams", "_loop.crash", "_loop.session", "_loop.turn", "_loop.pausing", "_loop.calls", "_loop.settings",
    "_loop.answers",
    "_loop.children", "_loop.budgets", "_loop.resuming", "_loop.run", "_loop.result", "_loop.handoffs",
    "instructions", "skills", "agent",
]  # fmt: skip
"""The core in the order data flows through one run: each module imports only modules before it."""

PRIVATE = ("_loop", "_schema")  # the core's machinery: no part outside the core reaches into it
PARTS: dict[str, set[str]] = {  # a module's part -> the parts it may import
    "core": {"core"},
    "brains": {"core", "brains"},
    "stores": {"core", "stores"},
    "toolkits": {"core", "toolkits"},
    "patterns": {"core", "patterns"},
    "observability": {"core", "observability"},
    "scale": {"core", "stores", "scale"},
    "evals": {"core", "brains", "stores", "toolkits", "patterns", "observability", "scale", "evals"},
    "faces": {"core", "brains", "stores", "toolkits", "patterns", "observability", "scale", "evals", "faces"},
}
PACKAGES = {
    "_loop": "core",
    "_schema": "core",
    "providers": "brains",
    "brains": "brains",
    "stores": "stores",
    "longterm": "stores",
    "toolkits": "toolkits",
    "mcp": "toolkits",
    "codeact": "toolkits",
    "strategies": "patterns",
    "dispatch": "scale",
    "evals": "evals",
    "cli": "faces",
    "serve": "faces",
}
MODULES = {
    "testing": "brains",
    "memory": "patterns",
    "provenance": "patterns",
    "trace": "observability",
    "telemetry": "observability",
}
MODULES.update({name: "core" for name in FLOW if "." not in name})
MODULES.update({"__init__": "core", "__main__": "faces"})
CAPS = {"tether.agent": 250}  # lines; every other module: DEFAULT_CAP
DEFAULT_CAP = 500
ROOM = 10  # no module sits within this many lines of its cap: the next feature must not have to squeeze it


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts.pop()
    return ".".join(parts)


def part_of(module: str) -> str:
    rest = module.split(".")[1:] or ["__init__"]
    if rest[0] in PACKAGES:
        return PACKAGES[rest[0]]
    if rest[0] in MODULES:
        return MODULES[rest[0]]
    raise AssertionError(f"{module} belongs to no part: place it in tests/test_layout.py")


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(SRC.rglob("*.py"))}


def imports_of(path: Path, name: str, known: set[str]) -> set[str]:
    """The tether modules ``path`` imports, wherever the import statement stands."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "tether")
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            if base.split(".")[0] != "tether":
                continue
            submodules = {f"{base}.{a.name}" for a in node.names} & known
            found.update(submodules)
            if len(submodules) < len(node.names):  # some names come from the module itself
                found.add(base)
    return {m for m in found if m in known and m != name}


def graph() -> dict[str, set[str]]:
    mods = modules()
    known = set(mods)
    return {name: imports_of(path, name, known) for name, path in mods.items()}


def test_every_module_belongs_to_a_part() -> None:
    for name in modules():
        part_of(name)


def test_no_import_breaks_the_arrows_of_the_parts() -> None:
    wrong = [
        f"{a} ({part_of(a)}) imports {b} ({part_of(b)})"
        for a, targets in graph().items()
        for b in sorted(targets)
        if part_of(b) not in PARTS[part_of(a)]
    ]
    assert wrong == []


def test_only_the_core_reaches_into_its_private_packages() -> None:
    private = tuple(f"tether.{p}" for p in PRIVATE)
    wrong = [
        f"{a} imports {b}"
        for a, targets in graph().items()
        if part_of(a) != "core"
        for b in sorted(targets)
        if b.startswith(private)
    ]
    assert wrong == []


def test_there_is_no_import_cycle() -> None:
    edges = graph()
    # A package's __init__ re-exporting its own modules is not a cycle through them.
    for name in edges:
        edges[name] = {m for m in edges[name] if not (name.startswith(m + ".") and m != "tether")}
    cycles: list[list[str]] = []
    state: dict[str, int] = {}

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(edges[node]):
            if state.get(nxt) == 1:
                cycles.append([*path[path.index(nxt) :], nxt])
            elif nxt not in state:
                visit(nxt, [*path, nxt])
        state[node] = 2

    for start in sorted(edges):
        if start not in state:
            visit(start, [start])
    assert cycles == []


def test_every_core_module_has_its_place_in_the_flow() -> None:
    core = {n.removeprefix("tether.") for n in modules() if part_of(n) == "core"}
    assert core - {"tether", *PRIVATE} == set(FLOW)


def test_the_core_imports_in_the_order_of_its_data_flow() -> None:
    edges = graph()
    for i, name in enumerate(FLOW):
        later = {f"tether.{m}" for m in FLOW[i + 1 :]}
        assert not edges[f"tether.{name}"] & later, f"tether.{name} imports a module after it in the data flow"


def test_no_module_is_near_its_cap() -> None:
    sizes = {name: len(path.read_text().splitlines()) for name, path in modules().items()}
    near = {n: (size, CAPS.get(n, DEFAULT_CAP)) for n, size in sizes.items() if size > CAPS.get(n, DEFAULT_CAP) - ROOM}
    assert near == {}


def test_the_loop_fits_on_one_screen() -> None:
    tree = ast.parse((SRC / "_loop" / "run.py").read_text())
    run = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Run")
    loop = next(n for n in run.body if isinstance(n, ast.AsyncFunctionDef) and n.name == "_loop")
    assert loop.end_lineno is not None and loop.end_lineno - loop.lineno + 1 <= 60


def test_the_architecture_page_shows_this_map() -> None:
    """docs/architecture.md's flow line is FLOW, word for word, and its parts table names every part."""
    page = (ROOT / "docs" / "architecture.md").read_text()
    line = re.search(r"<!-- flow -->\n`([^`]*)`", page)
    assert line is not None, "docs/architecture.md lost its <!-- flow --> line"
    assert line.group(1).split(" → ") == FLOW
    for package in PACKAGES:
        assert f"`{package}/`" in page, f"docs/architecture.md does not place {package}/"
