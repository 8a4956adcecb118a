"""Names a package face resolves on first use (docs/architecture.md#layout: package faces).

A face (a layer's ``__init__.py``) exports its layer's names; those whose modules are costly or not
needed by everyone who imports the package (a render worker imports ``harmony`` and ``request``) are
resolved when first read, by the ``__getattr__`` :func:`resolver` makes, and kept in the package.

A face says each name once (:func:`lazy_face`): in a top-level ``from .module import A, B`` where the
name is imported with the face, or in its ``if TYPE_CHECKING:`` block's, which a type checker reads, where
it is resolved on first use; its ``__all__`` and ``__getattr__`` are made from those statements at run
time (httpx's style: the names written once, ``tests/package/test_faces.py`` pins each ``__all__``).
"""

from __future__ import annotations

import ast
import importlib
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

__all__ = ["lazy_face", "resolver"]


def resolver(package: str, table: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package``: ``table`` maps a name to the relative module holding it."""

    def __getattr__(name: str) -> Any:
        module = table.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, package), name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__


def lazy_face(namespace: dict[str, Any]) -> list[str]:
    """The ``__all__`` of the face whose module namespace (its ``globals()``) is ``namespace``; sets its
    ``__getattr__`` to the :func:`resolver` of the names it resolves on first use.

    Its names are those its ``__init__.py`` imports from its own modules (``from .module import A, B``, no
    ``as``): at top level, imported with the face (names everyone who imports the layer needs), and in its
    ``if TYPE_CHECKING:`` block, each resolved from its module on first use. The ``__getattr__`` is set
    here, at run time, so a type checker sees the imports alone and no module ``__getattr__`` (a name the
    face does not export stays an error). Nothing else of the face is read, and nothing of the package is
    imported here. ``__all__`` is sorted.
    """
    file = namespace["__file__"]
    eager: list[str] = []
    table: dict[str, str] = {}
    for node in ast.parse(Path(file).read_text(encoding="utf-8"), file).body:
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
            eager += [alias.name for alias in node.names]
        elif isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for statement in node.body:
                if isinstance(statement, ast.ImportFrom) and statement.level == 1 and statement.module:
                    table.update({alias.name: f".{statement.module}" for alias in statement.names})
    namespace["__getattr__"] = resolver(namespace["__name__"], table)
    return sorted({*eager, *table})
