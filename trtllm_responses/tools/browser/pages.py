"""Pages as gpt-oss's browser shows them: text extracted from HTML, links as ``【ID†TITLE†DOMAIN】``, numbered lines."""

from __future__ import annotations

import html.parser
import textwrap
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urljoin, urlsplit

__all__ = [
    "PAGE_MAX_BYTES",
    "STORED_PAGE_CHARS",
    "VIEW_CHARS",
    "WRAP_WIDTH",
    "MAX_RESULTS",
    "BrowserError",
    "Page",
    "domain",
    "html_to_text",
    "int_argument",
]

#: Characters of numbered lines shown at once (the reference shows ~1024 tokens; ~4 characters a token).
VIEW_CHARS = 4096
WRAP_WIDTH = 80
PAGE_MAX_BYTES = 2 << 20
#: Characters of a page's text the conversation keeps (for later turns' open/find/citations).
STORED_PAGE_CHARS = 256 << 10
MAX_RESULTS = 10


class BrowserError(Exception):
    """A call the browser cannot serve; its message is what the model reads."""

    #: Its span's ``error.type`` (``tools/spans.py``).
    error_type = "browser_error"


class URLRefused(BrowserError):
    """A URL the browser does not open (the address guard, ``fetch.py``, refused it)."""

    error_type = "url_refused"


@dataclass
class Page:
    url: str  # "" for a search results page
    title: str
    text: str
    urls: dict[str, str] = field(default_factory=dict)  # link id → URL
    lines_at: dict[str, int] = field(default_factory=dict)  # link id → line to open at (find results)
    listing: bool = False  # search or find results: `find` does not run on them
    source: Page | None = None  # a find page: the page it searched (what its citations point at)
    source_cursor: int | None = None
    _lines: list[str] | None = field(default=None, repr=False, compare=False)

    @property
    def cited(self) -> Page:
        return self.source if self.source is not None else self

    def to_json(self) -> dict[str, Any]:
        """What the conversation keeps of the page (its text up to STORED_PAGE_CHARS)."""
        return {
            "url": self.url,
            "title": self.title,
            "text": self.text[:STORED_PAGE_CHARS],
            "urls": self.urls,
            "lines_at": self.lines_at,
            "listing": self.listing,
            "source_cursor": self.source_cursor,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any], stack: list[Page]) -> Page:
        source_cursor = data.get("source_cursor")
        source = (
            stack[source_cursor] if isinstance(source_cursor, int) and source_cursor < len(stack) else None
        )
        return cls(
            url=str(data.get("url") or ""),
            title=str(data.get("title") or ""),
            text=str(data.get("text") or ""),
            urls={str(k): str(v) for k, v in (data.get("urls") or {}).items()},
            lines_at={str(k): int(v) for k, v in (data.get("lines_at") or {}).items()},
            listing=bool(data.get("listing")),
            source=source,
            source_cursor=source_cursor if source is not None else None,
        )

    def lines(self) -> list[str]:
        """The text wrapped at WRAP_WIDTH columns (computed once: a 2 MiB page takes a fraction of a second)."""
        if self._lines is None:
            out: list[str] = []
            for line in self.text.split("\n"):
                out.extend(
                    textwrap.wrap(line, width=WRAP_WIDTH, replace_whitespace=False, drop_whitespace=False)
                    or [""]
                )
            self._lines = out
        return self._lines


def domain(url: str) -> str:
    """The host a link or citation names (the URL itself when it has none)."""
    return urlsplit(url).hostname or url


_BLOCKS = frozenset(
    "p div br li ul ol h1 h2 h3 h4 h5 h6 tr table section article header footer blockquote pre hr title".split()
)
_SKIP = frozenset({"script", "style", "noscript", "template", "svg", "head"})


class _HTMLText(html.parser.HTMLParser):
    """HTML → text lines; links become ``【ID†TEXT†DOMAIN】`` and are numbered in ``urls``."""

    def __init__(self, base_url: str) -> None:
        super().__init__(convert_charrefs=True)
        self.base = base_url
        self.parts: list[str] = []
        self.urls: dict[str, str] = {}
        self.title = ""
        self._skip = 0
        self._in_title = False
        self._link: str | None = None
        self._link_text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _SKIP:
            self._skip += 1
        if tag == "title":
            self._in_title = True
        if tag in _BLOCKS:
            self.parts.append("\n")
        if tag == "a" and self._skip == 0:
            href = dict(attrs).get("href")
            if href and not href.startswith(("javascript:", "mailto:", "#")):
                self._link = urljoin(self.base, href)
                self._link_text = []

    def handle_endtag(self, tag: str) -> None:
        if tag in _SKIP and self._skip:
            self._skip -= 1
        if tag == "title":
            self._in_title = False
        if tag == "a" and self._link is not None:
            text = " ".join("".join(self._link_text).split()).replace("】", "").replace("†", "")
            if text:
                link_id = str(len(self.urls))
                self.urls[link_id] = self._link
                self.parts.append(f"【{link_id}†{text}†{domain(self._link)}】")
            self._link = None
        if tag in _BLOCKS:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data
        if self._skip:
            return
        if self._link is not None:
            self._link_text.append(data)
        else:
            self.parts.append(data)


def html_to_text(markup: str, base_url: str) -> tuple[str, str, dict[str, str]]:
    """(title, text, link id → URL) of an HTML page."""
    parser = _HTMLText(base_url)
    parser.feed(markup)
    parser.close()
    text = "".join(parser.parts)
    lines = [" ".join(line.split()) for line in text.split("\n")]
    collapsed: list[str] = []
    for line in lines:
        if line or (collapsed and collapsed[-1]):
            collapsed.append(line)
    return " ".join(parser.title.split()), "\n".join(collapsed).strip("\n"), parser.urls


def int_argument(value: Any, name: str) -> int:
    """A call's integer argument ``name``; BrowserError (the model reads it) for anything else."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise BrowserError(f"`{name}` should be an integer, not `{type(value).__name__}`")
    return value
