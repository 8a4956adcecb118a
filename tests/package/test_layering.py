"""The package's layering (README, "Layout"): each folder is one layer and imports only downward.

An ``ast`` walk over ``trtllm_responses/`` reads every import, at module level, inside functions
and under ``TYPE_CHECKING`` alike (an import only a type checker follows is still a dependency,
and an import circle through one means two concerns were cut in the wrong place). It checks:

- every folder and root module of the package is placed in :data:`LAYERS` (a new folder must say
  where it stands);
- no module imports a module of a higher layer;
- no module imports one that imports it back, directly or around a circle;
- ``tensorrt_llm`` is reached only by the TensorRT-LLM executor.

The walker is run on small packages written here first, so a test that passes has a checker
that can fail.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest
from support.paths import PACKAGE

#: The layers, bottom to top: a module may import from its own layer and those before it.
LAYERS = [
    "core",
    "ops",
    "request",
    "harmony",
    "constraints",
    "adapter",
    "executors",
    "stream",
    "tools",
    "store",
    "responses",
    "server",
    "cli",
]
#: Root modules: the public facade (names resolved on first use) and ``python -m`` — above every layer.
FACADE = {"trtllm_responses", "trtllm_responses.__main__"}


def module_names(root: Path) -> dict[str, Path]:
    """Every module of the package at ``root``, by dotted name (a package by its own name)."""
    names = {}
    for path in root.rglob("*.py"):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join(parts)] = path
    return names


def imports_of(name: str, path: Path) -> set[str]:
    """The dotted names ``name`` (at ``path``) imports: modules and ``from`` targets, resolved."""
    found: set[str] = set()
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            found.add(source)
            found.update(f"{source}.{alias.name}" for alias in node.names)  # ``from pkg import module``
        elif (  # importlib.import_module("literal")
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            found.add(node.args[0].value)
    return found


def import_graph(root: Path) -> dict[str, set[str]]:
    """Module → the package's modules it imports."""
    modules = module_names(root)
    return {
        name: {target for target in imports_of(name, path) if target in modules and target != name}
        for name, path in modules.items()
    }


def layer_of(module: str) -> str | None:
    """The layer (first folder, or root module) a module belongs to; None for the facade."""
    if module in FACADE:
        return None
    return module.split(".")[1]


def upward_imports(graph: dict[str, set[str]], layers: list[str]) -> list[str]:
    """``a -> b`` for each import of a higher layer's module (the facade may import anything)."""
    rank = {layer: i for i, layer in enumerate(layers)}
    found = []
    for module, targets in sorted(graph.items()):
        here = layer_of(module)
        if here is None:
            continue
        for target in sorted(targets):
            there = layer_of(target)
            if there is None or rank[there] > rank[here]:
                found.append(f"{module} -> {target}")
    return found


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import circles: strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10 * len(graph) + 100))
    try:
        for node in sorted(graph):
            if node not in index:
                visit(node)
    finally:
        sys.setrecursionlimit(limit)
    return found


def _write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / "trtllm_responses" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root / "trtllm_responses"


def test_the_checker_finds_an_upward_import_and_a_circle(tmp_path: Path) -> None:
    package = _write(
        tmp_path,
        {
            "__init__.py": "",
            "core/__init__.py": "",
            "core/errors.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..server import app\n",
            "server/__init__.py": "",
            "server/app.py": "def f():\n    from . import routes\n",
            "server/routes.py": "from .app import f\nfrom ..core.errors import X\n",
        },
    )
    graph = import_graph(package)
    assert upward_imports(graph, ["core", "server"]) == [
        "trtllm_responses.core.errors -> trtllm_responses.server",
        "trtllm_responses.core.errors -> trtllm_responses.server.app",
    ]
    assert circles(graph) == [
        ["trtllm_responses.core.errors", "trtllm_responses.server.app", "trtllm_responses.server.routes"]
    ]


def test_the_checker_passes_a_package_that_only_imports_downward(tmp_path: Path) -> None:
    package = _write(
        tmp_path,
        {
            "__init__.py": "import importlib\nimportlib.import_module('trtllm_responses.server.app')\n",
            "core/__init__.py": "",
            "core/errors.py": "class X(Exception): ...\n",
            "server/__init__.py": "from .app import f\n",
            "server/app.py": "from ..core.errors import X\ndef f(): ...\n",
        },
    )
    graph = import_graph(package)
    assert graph["trtllm_responses"] == {"trtllm_responses.server.app"}
    assert upward_imports(graph, ["core", "server"]) == []
    assert circles(graph) == []


def test_every_folder_and_root_module_is_a_placed_layer() -> None:
    placed = set(LAYERS)
    seen = {layer_of(module) for module in module_names(PACKAGE)} - {None}
    assert seen == placed, f"not placed in LAYERS: {sorted(seen - placed)}; gone: {sorted(placed - seen)}"


def test_no_module_imports_from_a_higher_layer() -> None:
    assert upward_imports(import_graph(PACKAGE), LAYERS) == []


def test_no_import_circles() -> None:
    assert circles(import_graph(PACKAGE)) == []


def test_only_the_tensorrt_llm_executor_imports_tensorrt_llm() -> None:
    importers = sorted(
        name
        for name, path in module_names(PACKAGE).items()
        if any(t == "tensorrt_llm" or t.startswith("tensorrt_llm.") for t in imports_of(name, path))
    )
    assert importers == ["trtllm_responses.executors.trtllm"]


PUBLIC = [
    "ContentSealer",
    "ConversationHistoryStore",
    "EchoExecutor",
    "Executor",
    "HarmonyAdapter",
    "RedisStore",
    "ResponseStore",
    "SQLiteStore",
    "ServerConfig",
    "TrtllmExecutor",
    "create_app",
    "load_encoding",
    "main",
    "open_store",
]


def test_public_names_are_pinned_and_resolve_where_users_import_them() -> None:
    import trtllm_responses

    assert trtllm_responses.__all__ == PUBLIC
    for name in PUBLIC:
        assert getattr(trtllm_responses, name) is not None, name
    # The paths that predate the layout stay: the console script's entry, the app factory, executors, stores.
    from trtllm_responses.cli import main
    from trtllm_responses.executors import EchoExecutor
    from trtllm_responses.executors.trtllm import TrtllmExecutor
    from trtllm_responses.server import create_app
    from trtllm_responses.store import ConversationHistoryStore, open_store

    assert callable(main) and trtllm_responses.main is main
    assert trtllm_responses.create_app is create_app
    assert trtllm_responses.EchoExecutor is EchoExecutor and trtllm_responses.TrtllmExecutor is TrtllmExecutor
    assert trtllm_responses.open_store is open_store
    assert trtllm_responses.ConversationHistoryStore is ConversationHistoryStore
    with pytest.raises(AttributeError):
        trtllm_responses.no_such_name  # noqa: B018


def test_importing_the_harmony_layer_does_not_load_the_layers_above_it() -> None:
    """What render workers import (``harmony``) stays light: no service, no server."""
    code = (
        "import sys, trtllm_responses.harmony.render_pool; "
        "print(sorted({m.split('.')[1] for m in sys.modules if m.startswith('trtllm_responses.')}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    loaded = set(ast.literal_eval(out.stdout.strip()))
    assert loaded <= set(LAYERS[: LAYERS.index("harmony") + 1]), loaded
