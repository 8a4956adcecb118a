"""``serve``'s flags of the engine's fair share and of tenants' rate windows (docs/tenants.md#fair-share)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from .arg_types import non_negative_int, positive_float

if TYPE_CHECKING:
    from ..responses import AdmissionLimits

__all__ = ["add_admission", "admission_limits"]


def add_admission(serve: argparse.ArgumentParser) -> None:
    """The flags of :class:`~trtllm_responses.responses.AdmissionLimits`, each default its field's."""
    from ..responses import AdmissionLimits

    d = AdmissionLimits()
    group = serve.add_argument_group("fair share and rate limits (per frontend; docs/tenants.md#fair-share)")
    group.add_argument(
        "--max_running_responses",
        type=non_negative_int,
        default=d.max_running,
        help="turns this frontend runs at once; more wait, tenants taking turns by weight "
        f"(0: no bound, no queue; default: {d.max_running})",
    )
    group.add_argument(
        "--max_waiting_responses",
        type=non_negative_int,
        default=d.max_waiting,
        help=f"turns that may wait for a slot; one more is a 429 (default: {d.max_waiting})",
    )
    group.add_argument(
        "--max_wait_seconds",
        type=positive_float,
        default=d.max_wait,
        help=f"seconds a turn waits for a slot, then a 429 (default: {d.max_wait:g})",
    )
    group.add_argument(
        "--rate_window_seconds",
        type=positive_float,
        default=d.window,
        help="the window tenants' requests_per_minute and tokens_per_minute count in (the same on every "
        f"frontend and replica of a store; default: {d.window:g})",
    )


def admission_limits(args: argparse.Namespace) -> AdmissionLimits:
    """The AdmissionLimits of ``serve``'s flags."""
    from ..responses import AdmissionLimits

    return AdmissionLimits(
        max_running=args.max_running_responses,
        max_waiting=args.max_waiting_responses,
        max_wait=args.max_wait_seconds,
        window=args.rate_window_seconds,
    )
