"""``ConversationParams`` as TensorRT-LLM defines it (``tensorrt_llm/conversation_params.py``, re-exported by
``tensorrt_llm.llmapi``): a dataclass with one field, ``conversation_id``, "Stable multi-turn conversation id
used for routing"; ``None`` or a blank id is a ValueError, and the id is kept stripped (``__post_init__``)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ConversationParams"]


@dataclass(slots=True, kw_only=True)
class ConversationParams:
    """Conversation parameters: ``conversation_id``, the stable id of a multi-turn conversation."""

    conversation_id: str

    def __post_init__(self) -> None:
        if self.conversation_id is None:
            raise ValueError("conversation_id must be non-empty")
        conversation_id = str(self.conversation_id).strip()
        if not conversation_id:
            raise ValueError("conversation_id must be non-empty")
        self.conversation_id = conversation_id
