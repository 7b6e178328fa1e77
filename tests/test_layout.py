"""The map of the code holds: no import cycles, and every import follows the parts' arrows.

Every ``import`` in ``src/tether`` counts, at module level, inside functions and
under ``TYPE_CHECKING`` alike (DESIGN.md §9): Core imports only Core; Brains,
Stores, Toolkits, Patterns and Observability import only Core; Scale imports
Core and Stores; Faces import anything.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "tether"

CORE = {
    "__init__",
    "_crash",
    "_jsonschema",
    "_notes",
    "_streams",
    "agent",
    "budgets",
    "calls",
    "children",
    "context",
    "cost",
    "docstrings",
    "events",
    "exceptions",
    "handoffs",
    "journal",
    "leases",
    "messages",
    "output",
    "parts",
    "pending",
    "policy",
    "result",
    "resuming",
    "run",
    "session",
    "settings",
    "state",
    "store",
    "strictjson",
    "tools",
    "turn",
}
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
    "providers": "brains",
    "brains": "brains",
    "stores": "stores",
    "toolkits": "toolkits",
    "mcp": "toolkits",
    "strategies": "patterns",
    "dispatch": "scale",
    "evals": "evals",
    "cli": "faces",
    "serve": "faces",
}
MODULES = {"testing": "brains", "memory": "patterns", "trace": "observability", "telemetry": "observability"}
MODULES.update({name: "core" for name in CORE})
MODULES["__main__"] = "faces"


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
    raise AssertionError(f"{module} belongs to no part of DESIGN.md §9: place it in tests/test_layout.py")


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


def test_the_core_imports_in_the_order_of_its_data_flow() -> None:
    order = [
        "strictjson", "parts", "messages", "cost", "context", "docstrings", "tools", "policy", "pending", "state",
        "events", "output", "journal", "leases", "store", "session", "turn", "calls", "settings", "children", "budgets",
        "resuming", "run", "result", "handoffs", "agent",
    ]  # fmt: skip
    edges = graph()
    for i, name in enumerate(order):
        later = {f"tether.{m}" for m in order[i + 1 :]}
        assert not edges[f"tether.{name}"] & later, f"tether.{name} imports a module after it in the data flow"


def test_no_module_is_longer_than_a_newcomer_reads_at_once() -> None:
    sizes = {name: len(path.read_text().splitlines()) for name, path in modules().items()}
    assert {name: n for name, n in sizes.items() if n > 500} == {}
    assert sizes["tether.agent"] <= 250


def test_the_loop_fits_on_one_screen() -> None:
    tree = ast.parse((SRC / "run.py").read_text())
    run = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Run")
    loop = next(n for n in run.body if isinstance(n, ast.AsyncFunctionDef) and n.name == "_loop")
    assert loop.end_lineno is not None and loop.end_lineno - loop.lineno + 1 <= 60
