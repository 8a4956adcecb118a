"""One page of a ``list`` object (response input items, conversation items): OpenAI's cursor pagination.

Items are (id, serialized JSON) pairs in their natural order; ``order`` is
``asc`` or ``desc``, ``after`` the id the page starts after, ``limit`` its size.
The JSON is assembled from the stored bytes, never re-serialized.
"""

from __future__ import annotations

from collections.abc import Sequence

import orjson

from ..core.errors import InvalidRequestError

__all__ = ["list_page_json", "page_json"]


def list_page_json(
    items: Sequence[tuple[str, bytes]], *, after: str | None, limit: int, order: str, where: str
) -> bytes:
    """``{"object": "list", "data", "first_id", "last_id", "has_more"}``; an unknown ``after`` is a 400."""
    ordered = list(items)
    if order == "desc":
        ordered.reverse()
    start = 0
    if after is not None:
        try:
            start = [item_id for item_id, _ in ordered].index(after) + 1
        except ValueError:
            raise InvalidRequestError(f"No item with id '{after}' in {where}.", param="after") from None
    return page_json(ordered[start : start + limit], start + limit < len(ordered))


def page_json(page: Sequence[tuple[str, bytes]], has_more: bool) -> bytes:
    """A ``list`` object of one page of items, in order."""
    return b"".join(
        [
            b'{"object":"list","data":[',
            b",".join(data for _, data in page),
            b'],"first_id":',
            orjson.dumps(page[0][0] if page else None),
            b',"last_id":',
            orjson.dumps(page[-1][0] if page else None),
            b',"has_more":',
            b"true" if has_more else b"false",
            b"}",
        ]
    )
