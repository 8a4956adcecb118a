"""The package's layering (docs/architecture.md#layout), written as data: :data:`CONTRACT`.

An ``ast`` walk over ``trtllm_responses/`` reads every import, at module level, inside functions
and under ``TYPE_CHECKING`` alike (an import only a type checker follows is still a dependency,
and an import circle through one means two concerns were cut in the wrong place). It checks:

- every folder of the package is a layer of :data:`CONTRACT` (a new folder must say where it
  stands and what it may use), and the contract itself only lets a layer use layers below it;
- each layer imports exactly the layers :data:`CONTRACT` allows it: one more is a forbidden
  edge, one fewer a stale allowance to remove (so the table stays the true picture);
- a module reaches another layer only through that layer's face, ``trtllm_responses.<layer>`` (its
  ``__init__.py`` and ``__all__``), save the modules named in :data:`PAST_THE_FACE`;
- no module imports one that imports it back, directly or around a circle;
- ``tensorrt_llm`` is reached only by the TensorRT-LLM executor.

The checker is run on small packages written here first, and on a copy of the real package with
one forbidden import added, so a test that passes has a checker that can fail.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest
from support.paths import PACKAGE

#: The layers, bottom to top (docs/architecture.md#layout): a layer may only use layers before it.
LAYERS = [
    "core",
    "ops",
    "tenants",
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

#: The contract: each layer → the exact layers it imports from (its own is always allowed). Adding
#: an edge is a decision to write here, with its reason, not a side effect of an import.
CONTRACT: dict[str, frozenset[str]] = {
    "core": frozenset(),
    "ops": frozenset({"core"}),
    # who is asking: keys, limits, fair share (docs/tenants.md); nothing above core
    "tenants": frozenset({"core"}),
    "request": frozenset({"core"}),
    # input items read with the request's field checks and reasoning effort; what tool_choice shows and
    # requires decided over the request's typed tools and tool_choice (harmony/tool_choice.py)
    # a render worker (harmony/render_pool.py) logs in the server's --log_format (ops/log_format.py)
    "harmony": frozenset({"core", "ops", "request"}),
    # a Constraint is made of harmony's header grammar, tool calls and schema checks, and the request's
    # typed text format (request/text_format.py)
    "constraints": frozenset({"core", "request", "harmony"}),
    # the adapter renders a request to Harmony under one Constraint
    "adapter": frozenset({"core", "request", "harmony", "constraints"}),
    # executors enforce a Constraint; the echo executor speaks Harmony; no request, no adapter
    "executors": frozenset({"harmony", "constraints"}),
    # the stream reads the executors' token deltas through harmony's parser
    "stream": frozenset({"core", "harmony", "executors"}),
    # providers: a request's tools, harmony's tool_choice rule for built-ins (builtin_types_shown),
    # and a text rewriter they hand the stream (the browser's citations); the spans of their calls and MCP
    # requests (ops/tracing.py)
    "tools": frozenset({"core", "ops", "request", "harmony", "stream"}),
    # the store keeps the adapter's rendered histories and pages lists as the request side reads them; it
    # keeps the counts of tenants' limits (its ``counters()`` are tenants' Counters, docs/tenants.md#limits)
    "store": frozenset({"core", "tenants", "request", "adapter"}),
    "responses": frozenset(
        {"core", "ops", "tenants", "request", "harmony", "adapter", "executors", "stream", "tools", "store"}
    ),
    "server": frozenset(
        {
            "core",
            "ops",
            "tenants",
            "request",
            "harmony",
            "adapter",
            "executors",
            "tools",
            "store",
            "responses",
        }
    ),
    # cli starts the process (and a group of frontends: the group's metrics folder, ops)
    "cli": frozenset(
        {
            "core",
            "ops",
            "tenants",
            "request",
            "harmony",
            "adapter",
            "executors",
            "tools",
            "store",
            "responses",
            "server",
        }
    ),
}
#: Modules another layer may import by their own path, not through their layer's face, and why.
PAST_THE_FACE = {
    # The only module importing tensorrt_llm: reached by its path where the trtllm engine is chosen (cli),
    # so importing the executors (the echo executor, the seam) never loads it.
    "trtllm_responses.executors.trtllm": "the TensorRT-LLM executor, loaded only where it is chosen",
    # grpcio and the generated stubs: reached by its path where --engine trtllm-grpc is chosen (cli), so the
    # package imports without the grpc extra.
    "trtllm_responses.executors.trtllm_grpc.executor": "the TensorRT-LLM gRPC executor, loaded only where it is chosen",
}

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


def layer_edges(graph: dict[str, set[str]]) -> dict[tuple[str, str], list[str]]:
    """``(layer, used layer)`` → the imports ``a -> b`` that make that edge (the facade is above the layers)."""
    edges: dict[tuple[str, str], list[str]] = {}
    for module, targets in sorted(graph.items()):
        here = layer_of(module)
        if here is None:
            continue
        for target in sorted(targets):
            there = layer_of(target)
            if there != here:
                edges.setdefault((here, there or "<facade>"), []).append(f"{module} -> {target}")
    return edges


def forbidden_imports(graph: dict[str, set[str]], contract: dict[str, frozenset[str]]) -> list[str]:
    """``a -> b`` for each import of a layer the contract does not let ``a``'s layer use."""
    return [
        line
        for (here, there), lines in layer_edges(graph).items()
        if there not in contract.get(here, frozenset())
        for line in lines
    ]


def unused_allowances(graph: dict[str, set[str]], contract: dict[str, frozenset[str]]) -> list[str]:
    """``layer -> layer`` for each edge the contract allows and no import makes (a stale line of the table)."""
    used = set(layer_edges(graph))
    return sorted(
        f"{here} -> {there}"
        for here, allowed in contract.items()
        for there in allowed
        if (here, there) not in used
    )


def past_the_face(root: Path, allowed: Mapping[str, str]) -> list[str]:
    """``module: import`` for each import of another layer's module that does not go through its face."""
    found = []
    for name, path in sorted(module_names(root).items()):
        here = layer_of(name)
        if here is None:
            continue
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                sources = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package[: len(package) - node.level + 1]
                    sources = [".".join(base + ([node.module] if node.module else []))]
                else:
                    sources = [node.module or ""]
            else:
                continue
            for source in sources:
                parts = source.split(".")
                if parts[0] != "trtllm_responses" or len(parts) < 3 or parts[1] == here or source in allowed:
                    continue
                found.append(f"{name}: {ast.unparse(node)}")
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


def test_the_checker_finds_a_forbidden_import_and_a_circle(tmp_path: Path) -> None:
    package = _write(
        tmp_path,
        {
            "__init__.py": "",
            "core/__init__.py": "",
            "core/errors.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..server import app\n",
            "store/__init__.py": "",
            "store/base.py": "def f():\n    from ..core.errors import X\n",
            "server/__init__.py": "",
            "server/app.py": "def f():\n    from . import routes\n",
            "server/routes.py": "from .app import f\nfrom ..core.errors import X\n",
        },
    )
    graph = import_graph(package)
    contract = {"core": frozenset(), "store": frozenset(), "server": frozenset({"core", "store"})}
    assert forbidden_imports(graph, contract) == [
        "trtllm_responses.core.errors -> trtllm_responses.server",
        "trtllm_responses.core.errors -> trtllm_responses.server.app",
        "trtllm_responses.store.base -> trtllm_responses.core.errors",  # a lower layer, but not allowed
    ]
    assert unused_allowances(graph, contract) == ["server -> store"]
    assert circles(graph) == [
        ["trtllm_responses.core.errors", "trtllm_responses.server.app", "trtllm_responses.server.routes"]
    ]


def test_the_checker_passes_a_package_that_keeps_its_contract(tmp_path: Path) -> None:
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
    contract = {"core": frozenset(), "server": frozenset({"core"})}
    assert forbidden_imports(graph, contract) == []
    assert unused_allowances(graph, contract) == []
    assert circles(graph) == []


@pytest.mark.parametrize(
    ("module", "line", "edge"),
    [
        (
            "executors/echo.py",
            "from ..adapter import HarmonyAdapter",
            "executors.echo -> trtllm_responses.adapter",
        ),
        (
            "store/base.py",
            "from ..stream.item import TextRewriter",
            "store.base -> trtllm_responses.stream.item",
        ),
    ],
)
def test_the_contract_refuses_an_edge_added_to_the_real_package(
    tmp_path: Path, module: str, line: str, edge: str
) -> None:
    """Both edges import a lower layer, so "only downward" alone let them through; the contract does not."""
    package = tmp_path / "trtllm_responses"
    shutil.copytree(PACKAGE, package, ignore=shutil.ignore_patterns("__pycache__"))
    assert forbidden_imports(import_graph(package), CONTRACT) == []
    path = package / module
    path.write_text(path.read_text() + f"\n{line}  # noqa: E402\n")
    assert forbidden_imports(import_graph(package), CONTRACT) == [f"trtllm_responses.{edge}"]


def test_every_folder_is_a_layer_of_the_contract() -> None:
    assert list(CONTRACT) == LAYERS
    seen = {layer_of(module) for module in module_names(PACKAGE)} - {None}
    assert seen == set(LAYERS), (
        f"not in CONTRACT: {sorted(seen - set(LAYERS))}; gone: {sorted(set(LAYERS) - seen)}"
    )


def test_the_contract_lets_a_layer_use_only_layers_below_it() -> None:
    upward = [
        f"{here} -> {there}"
        for here, allowed in CONTRACT.items()
        for there in allowed
        if LAYERS.index(there) >= LAYERS.index(here)
    ]
    assert upward == []


def test_each_layer_imports_only_what_the_contract_allows() -> None:
    assert forbidden_imports(import_graph(PACKAGE), CONTRACT) == []


def test_the_contract_allows_no_edge_nothing_uses() -> None:
    assert unused_allowances(import_graph(PACKAGE), CONTRACT) == []


def test_the_checker_finds_an_import_past_a_face(tmp_path: Path) -> None:
    package = _write(
        tmp_path,
        {
            "__init__.py": "from .server.app import f\n",  # the facade may
            "core/__init__.py": "from .errors import X\n",
            "core/errors.py": "class X(Exception): ...\n",
            "core/heavy.py": "Y = 1\n",
            "server/__init__.py": "",
            "server/app.py": "from ..core import X\nfrom .routes import g\ndef f():\n    from ..core.errors import X\n",
            "server/routes.py": "import trtllm_responses.core.heavy\nfrom trtllm_responses.core import X\ndef g(): ...\n",
        },
    )
    assert past_the_face(package, {}) == [
        "trtllm_responses.server.app: from ..core.errors import X",
        "trtllm_responses.server.routes: import trtllm_responses.core.heavy",
    ]
    assert (
        past_the_face(package, {"trtllm_responses.core.heavy": "", "trtllm_responses.core.errors": ""}) == []
    )


def test_each_layer_reaches_another_only_through_its_face() -> None:
    assert past_the_face(PACKAGE, PAST_THE_FACE) == []


def test_every_name_a_face_exports_resolves() -> None:
    """A face's ``__all__`` is what other layers import; each name, eager or resolved on first use, is there."""
    import importlib

    missing = []
    for layer in LAYERS:
        face = importlib.import_module(f"trtllm_responses.{layer}")
        missing += [f"{layer}.{name}" for name in getattr(face, "__all__", []) if not hasattr(face, name)]
    assert missing == []


def test_no_import_circles() -> None:
    assert circles(import_graph(PACKAGE)) == []


def test_only_the_tensorrt_llm_executor_imports_tensorrt_llm() -> None:
    importers = sorted(
        name
        for name, path in module_names(PACKAGE).items()
        if any(t == "tensorrt_llm" or t.startswith("tensorrt_llm.") for t in imports_of(name, path))
    )
    # The TensorRT-LLM executor is trtllm.py and the set-up checks it re-exports (trtllm_setup.py, imported by it
    # alone), both reached only past the executors' face.
    assert importers == ["trtllm_responses.executors.trtllm", "trtllm_responses.executors.trtllm_setup"]
    users = sorted(
        name
        for name, path in module_names(PACKAGE).items()
        if "trtllm_responses.executors.trtllm_setup" in imports_of(name, path)
    )
    assert users == ["trtllm_responses.executors.trtllm"]


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


def test_a_render_worker_does_not_import_openai() -> None:
    """Every ``serve`` starts render workers: they need the encoding, not the openai package's types."""
    code = "import sys, trtllm_responses.harmony.render_pool; print('openai' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize(
    ("module", "not_loaded"),
    [
        # the harmony face resolves these on first use, so render workers, which import harmony, skip them
        (
            "trtllm_responses.harmony.render_pool",
            [
                "harmony.developer",
                "harmony.schema",
                "harmony.json_cut",
                "harmony.input_messages",  # openai's types: 0.9 s of CPU a worker
                "harmony.items",
                "harmony.completion",
                "harmony.tools",
                "request.chat",
                "core.wire",
            ],
        ),
        ("trtllm_responses.executors", ["executors.trtllm"]),
        ("trtllm_responses.tools", ["tools.prepare", "tools.unavailable"]),  # MCP's client takes seconds
    ],
)
def test_a_face_does_not_load_what_its_importers_do_not_use(module: str, not_loaded: list[str]) -> None:
    code = f"import sys, {module}; print(sorted(m for m in sys.modules if m.startswith('trtllm_responses.')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    loaded = set(ast.literal_eval(out.stdout.strip()))
    assert loaded.isdisjoint(f"trtllm_responses.{name}" for name in not_loaded), loaded
