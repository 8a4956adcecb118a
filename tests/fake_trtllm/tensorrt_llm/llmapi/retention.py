"""``KvCacheRetentionConfig`` as TensorRT-LLM binds it (``tensorrt_llm.llmapi`` re-exports it from
``tensorrt_llm.bindings.executor``; the constructor signatures are those of
``cpp/tensorrt_llm/nanobind/executor/request.cpp``, the limits those of ``cpp/include/tensorrt_llm/executor/executor.h``:
priorities 0-100, default 35, durations ``std::chrono::milliseconds`` taken as ``datetime.timedelta``)."""

from __future__ import annotations

import datetime
from typing import Optional

MIN_PRIORITY, MAX_PRIORITY, DEFAULT_PRIORITY = 0, 100, 35


def _check(priority: int) -> int:
    if not MIN_PRIORITY <= priority <= MAX_PRIORITY:
        raise ValueError(f"Invalid priority value. Must be between {MIN_PRIORITY} and {MAX_PRIORITY}")
    return priority


class TokenRangeRetentionConfig:
    def __init__(
        self,
        token_start: int,
        token_end: Optional[int],
        priority: int,
        duration_ms: Optional[datetime.timedelta] = None,
    ) -> None:
        if duration_ms is not None and not isinstance(duration_ms, datetime.timedelta):
            raise TypeError("duration_ms must be a datetime.timedelta")
        self.token_start, self.token_end, self.priority = token_start, token_end, _check(priority)
        self.duration_ms = duration_ms


class KvCacheRetentionConfig:
    TokenRangeRetentionConfig = TokenRangeRetentionConfig

    def __init__(
        self,
        token_range_retention_configs: list[TokenRangeRetentionConfig],
        decode_retention_priority: int = DEFAULT_PRIORITY,
        decode_duration_ms: Optional[datetime.timedelta] = None,
        transfer_mode: object = None,
        directory: Optional[str] = None,
    ) -> None:
        self.token_range_retention_configs = list(token_range_retention_configs)
        self.decode_retention_priority = _check(decode_retention_priority)
        self.decode_duration_ms = decode_duration_ms
        self.directory = directory
