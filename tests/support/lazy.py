"""A test module's heavy optional library, imported when a test first uses it, not when pytest collects.

Every pytest-xdist worker collects every module, so a module-level ``import xgrammar`` (torch with it, ~4 s of
CPU), ``anthropic`` (~2 s) or ``agents`` (~2 s) was paid by each of ``make test``'s three workers before its
first test, whichever worker then ran the tests that use it. ``lazy_import(name)`` is
``pytest.importorskip(name)`` deferred to the first attribute a test reads: a missing library still skips the
tests that need it, now one by one.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pytest


class LazyModule:
    """Stands for the module ``name``; its first attribute read imports it (or skips the test reading it)."""

    def __init__(self, name: str, reason: str | None = None) -> None:
        self._name = name
        self._reason = reason
        self._module: ModuleType | None = None

    def __getattr__(self, attribute: str) -> Any:
        if attribute.startswith("_"):  # pytest's collection probes each module global (``__test__``, fixture
            raise AttributeError(attribute)  # markers): not a use, no import
        module = self._module
        if module is None:
            module = self._module = pytest.importorskip(self._name, reason=self._reason)
        return getattr(module, attribute)


def lazy_import(name: str, reason: str | None = None) -> Any:
    """``name`` imported on first use (typed ``Any``: the tests use it as the module)."""
    return LazyModule(name, reason)
