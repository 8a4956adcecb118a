"""Names a package face resolves on first use (docs/architecture.md#layout: package faces).

A face (a layer's ``__init__.py``) exports its layer's names; those whose modules are costly or not
needed by everyone who imports the package (a render worker imports ``harmony`` and ``request``) are
resolved when first read, by the ``__getattr__`` :func:`resolver` makes, and kept in the package.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["resolver"]


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
