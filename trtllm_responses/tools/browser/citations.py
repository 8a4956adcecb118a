"""Citations in the final answer: ``【CURSOR†L1-L2】`` becomes `` ([DOMAIN](URL))`` and a ``url_citation`` annotation."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from .pages import domain

__all__ = ["CitationRewriter"]

_CITATION = re.compile(r"【(?P<cursor>\d+)†(?P<content>[^†】]+)(?:†[^†】]+)?】")


class CitationRewriter:
    """Rewrites a message's text as it streams: ``【CURSOR†L1-L2】`` → `` ([DOMAIN](URL))`` + a url_citation.

    ``feed`` takes a delta and returns the text to emit now and the annotations it completed
    (offsets in the rewritten text, in characters); text that may be the start of a citation is held
    back until it is known (at most a short marker). ``flush`` releases what is held at the end.
    """

    __slots__ = ("_cite", "_held", "_length", "annotations")
    _MAX_MARKER = 64

    def __init__(self, cite: Callable[[int], tuple[str, str] | None]) -> None:
        self._cite = cite
        self._held = ""
        self._length = 0  # characters emitted so far
        self.annotations: list[dict[str, Any]] = []

    def feed(self, text: str) -> tuple[str, list[dict[str, Any]]]:
        if not self._held and "【" not in text:
            self._length += len(text)
            return text, []
        data = self._held + text
        self._held = ""
        out: list[str] = []
        found: list[dict[str, Any]] = []
        while data:
            start = data.find("【")
            if start < 0:
                out.append(data)
                break
            out.append(data[:start])
            end = data.find("】", start)
            if end < 0:
                if len(data) - start < self._MAX_MARKER and "\n" not in data[start:]:
                    self._held = data[start:]
                else:
                    out.append(data[start : start + 1])
                    data = data[start + 1 :]
                    continue
                break
            marker = data[start : end + 1]
            data = data[end + 1 :]
            before = "".join(out)
            replacement = self._replace(marker, self._length + len(before), found)
            out.append(replacement)
        emitted = "".join(out)
        self._length += len(emitted)
        return emitted, found

    def _replace(self, marker: str, at: int, found: list[dict[str, Any]]) -> str:
        match = _CITATION.fullmatch(marker)
        source = self._cite(int(match.group("cursor"))) if match else None
        if source is None:
            return marker
        url, title = source
        replacement = f"([{domain(url)}]({url}))"
        annotation = {
            "type": "url_citation",
            "url": url,
            "title": title,
            "start_index": at,
            "end_index": at + len(replacement),
        }
        self.annotations.append(annotation)
        found.append(annotation)
        return replacement

    def flush(self) -> str:
        held, self._held = self._held, ""
        self._length += len(held)
        return held
