"""``support/lazy.py``: a test module's heavy library is imported at its first use, never by pytest's collection."""

from __future__ import annotations

import sys

import pytest
from support.lazy import lazy_import


def test_collections_probes_import_nothing_and_a_use_imports_the_module() -> None:
    name = "colorsys"  # in the standard library, imported by nothing else here
    sys.modules.pop(name, None)
    lazy = lazy_import(name)
    for probe in ("__test__", "_pytestfixturefunction", "__wrapped__"):  # what collection reads
        with pytest.raises(AttributeError):
            getattr(lazy, probe)
    assert name not in sys.modules
    assert lazy.rgb_to_hsv(1.0, 0.0, 0.0) == (0.0, 1.0, 1.0)
    assert name in sys.modules


def test_a_missing_library_skips_the_test_that_uses_it() -> None:
    lazy = lazy_import("no_such_library_for_trtllm_responses", reason="not installed here")
    with pytest.raises(pytest.skip.Exception, match="not installed here"):
        lazy.anything  # noqa: B018
