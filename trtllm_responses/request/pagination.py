"""One page of a ``list`` object (response input items, conversation items): OpenAI's cursor pagination.

Items are (id, serialized JSON) pairs in their natural order; ``order`` is
``asc`` or ``desc``, ``after`` the id the page starts after, ``limit`` its size.
The JSON is assembled from the stored bytes, never re-serialized.
"""

from __future__ import annotations

from collections.abc import Sequence

import orjson

from ..core import InvalidRequestError

__all__ = ["list_page_json", "page_json", "page_of"]


def list_page_json(
    items: Sequence[tuple[str, bytes]], *, after: str | None, limit: int, order: str, where: str
) -> bytes:
    """``{"object": "list", "data", "first_id", "last_id", "has_more"}``; an unknown ``after`` is a 400."""
    try:
        page, has_more = page_of(items, after=after, limit=limit, order=order)
    except LookupError:
        raise InvalidRequestError(f"No item with id '{after}' in {where}.", param="after") from None
    return page_json(page, has_more)


def page_of(
    items: Sequence[tuple[str, bytes]], *, after: str | None, limit: int, order: str
) -> tuple[list[tuple[str, bytes]], bool]:
    """A page of ``items`` (oldest first) in ``order`` after ``after``, and whether more follow;
    LookupError for an unknown ``after``."""
    n = len(items)
    indices = range(n) if order == "asc" else range(n - 1, -1, -1)
    start = 0
    if after is not None:
        for position, index in enumerate(indices):
            if items[index][0] == after:
                start = position + 1
                break
        else:
            raise LookupError(after)
    chosen = indices[start : start + limit]
    return [items[i] for i in chosen], start + limit < n


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
