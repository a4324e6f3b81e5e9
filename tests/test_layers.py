"""The architecture stays true: imports run one way, and no two files import
each other (directly or through a chain).

    client/  →  worker.py  →  activities/  →  infra/  →  workflows/

A layer may import the layers to its right, never those to its left.
``workflows/`` is deterministic workflow code and imports only itself;
``infra/`` is what the worker and the CLI share. Around the product:
``testkit/`` (the scripted servers and test helpers) imports only the product,
``bench/`` imports the product and ``testkit/``, ``tests/`` imports anything,
and nothing in the product imports any of the three.
Imports inside functions (lazy imports) count too. See docs/architecture.md.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("workflows", "activities", "infra", "client", "prompts", "testkit", "tests", "bench")
# What each part of the product may import from the project (besides itself).
ALLOWED = {
    "workflows": set(),
    "infra": {"workflows"},
    "activities": {"infra", "workflows", "prompts"},
    "worker": {"activities", "infra", "workflows", "prompts"},
    "client": {"worker", "infra", "workflows", "prompts"},
    "prompts": set(),
}
PRODUCT = set(ALLOWED)
ALLOWED |= {
    "testkit": PRODUCT,
    "bench": PRODUCT | {"testkit"},
}


def project_modules() -> dict[str, Path]:
    modules = {"worker": ROOT / "worker.py"}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            modules[name] = path
    return modules


MODULES = project_modules()


def imported(path: Path, name: str) -> set[str]:
    """Project modules that the file at ``path`` (module ``name``) imports."""
    found: set[str] = set()
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative import
                anchor = name.split(".")
                anchor = anchor if is_package else anchor[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            targets = [f"{base}.{alias.name}" for alias in node.names] + [base]
        for target in targets:
            # The longest prefix that is one of our modules.
            parts = target.split(".")
            for end in range(len(parts), 0, -1):
                candidate = ".".join(parts[:end])
                if candidate in MODULES:
                    if candidate != name:
                        found.add(candidate)
                    break
    return found


GRAPH = {name: imported(path, name) for name, path in MODULES.items()}


def layer(module: str) -> str:
    return module.split(".")[0]


def test_the_scan_sees_the_project():
    assert {"workflows.deep_research", "activities.llm", "infra.temporal", "client.cli", "worker"} <= set(MODULES)
    assert "workflows.models" in GRAPH["workflows.deep_research"]


def test_imports_run_one_way():
    wrong = [
        f"{module} imports {target}"
        for module, targets in sorted(GRAPH.items())
        if layer(module) in ALLOWED
        for target in sorted(targets)
        if layer(target) != layer(module) and layer(target) not in ALLOWED[layer(module)]
    ]
    assert not wrong, (
        "imports against the layering (client → worker → activities → infra → workflows; "
        "testkit → the product; bench → the product and testkit):\n" + "\n".join(wrong)
    )


def test_no_file_level_import_cycles():
    cycles: list[list[str]] = []
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(module: str) -> None:
        state[module] = 1
        path.append(module)
        for target in sorted(GRAPH[module]):
            if state.get(target) == 1:
                cycles.append(path[path.index(target) :] + [target])
            elif target not in state:
                visit(target)
        path.pop()
        state[module] = 2

    for module in sorted(GRAPH):
        if module not in state:
            visit(module)
    assert not cycles, "import cycles:\n" + "\n".join(" → ".join(c) for c in cycles)


def test_the_product_imports_no_test_code():
    wrong = [
        f"{module} imports {target}"
        for module, targets in sorted(GRAPH.items())
        if layer(module) in PRODUCT
        for target in sorted(targets)
        if layer(target) in ("testkit", "tests", "bench")
    ]
    assert not wrong, "the product imports test or benchmark code:\n" + "\n".join(wrong)
