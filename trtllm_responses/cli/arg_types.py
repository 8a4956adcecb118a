"""The argument types of ``serve``'s flags: each parsed and checked once, for every group of flags."""

from __future__ import annotations

import argparse

__all__ = ["non_negative_float", "non_negative_int", "positive_float", "positive_int"]


def positive_int(text: str) -> int:
    """An integer >= 1 (argparse's usage error otherwise)."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


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


def non_negative_float(text: str) -> float:
    """A number >= 0 (argparse's usage error otherwise)."""
    value = float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value
