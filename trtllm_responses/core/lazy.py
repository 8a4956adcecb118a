"""Names a package face resolves on first use (docs/architecture.md#layout: package faces).

A face (a layer's ``__init__.py``) exports its layer's names; those whose modules are costly or not
needed by everyone who imports the package (a render worker imports ``harmony`` and ``request``) are
resolved when first read, by the ``__getattr__`` :func:`resolver` makes, and kept in the package.

A face may say each name once (:func:`lazy_face`): in its ``if TYPE_CHECKING:`` block's ``from .module
import A, B`` statements, which a type checker reads, and from which its ``__all__`` and its
``__getattr__`` are made at run time (httpx's style: the names written once, a test pins ``__all__``).
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


def lazy_face(package: str, file: str) -> tuple[list[str], Callable[[str], Any]]:
    """The ``__all__`` and ``__getattr__`` of the face ``package`` (its ``__init__.py`` at ``file``).

    Its names are those its ``if TYPE_CHECKING:`` block imports from its own modules
    (``from .module import A, B``, no ``as``), each resolved from that module on first use; nothing else of the
    face is read, and nothing of the package is imported here. ``__all__`` is sorted.
    """
    table: dict[str, str] = {}
    for node in ast.parse(Path(file).read_text(encoding="utf-8"), file).body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for statement in node.body:
                if isinstance(statement, ast.ImportFrom) and statement.level == 1 and statement.module:
                    table.update({alias.name: f".{statement.module}" for alias in statement.names})
    return sorted(table), resolver(package, table)
