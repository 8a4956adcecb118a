"""Argument types of ``serve``'s flags that more than one group of them uses: parsed and checked."""

from __future__ import annotations

import argparse

__all__ = ["non_negative_int", "positive_float"]


def non_negative_int(text: str) -> int:
    """An integer >= 0 (argparse's usage error otherwise)."""
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value


def positive_float(text: str) -> float:
    """A number > 0 (argparse's usage error otherwise)."""
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return value
