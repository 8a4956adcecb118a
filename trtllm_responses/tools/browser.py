"""gpt-oss's ``browser`` tool as a server-run ``web_search``: search, open, find, and citations.

The semantics follow the gpt-oss reference browser (``gpt_oss/tools/simple_browser``):

- ``browser.search {"query", "topn"}`` asks the search backend and shows the results as a page
  whose links are ``【ID†TITLE†DOMAIN】``;
- ``browser.open {"id", "cursor", "loc", "num_lines"}`` opens link ``id`` of the page at ``cursor``
  (default: the last page), a URL given as ``id``, or scrolls the page at ``cursor`` to line ``loc``;
- ``browser.find {"pattern", "cursor"}`` shows the lines of a page matching ``pattern`` (case-insensitive);
- every page shown goes on the page stack: its index is its ``cursor``, shown as ``[CURSOR]`` before the
  page, and a window of its lines is shown numbered (``L12: ...``), about 1024 tokens at a time;
- the model cites ``【CURSOR†L12-L14】``; in its final answer each citation of a page becomes
  ``([DOMAIN](URL))`` with a ``url_citation`` annotation (:class:`CitationRewriter`), as OpenAI renders them.

Pages are fetched with a plain, guarded GET (``tools/fetch.py``: size cap, timeout, no private
addresses unless allowed) and HTML is turned into text here. The page stack lives for the response chain:
each page a call pushes is kept (its text up to STORED_PAGE_CHARS) on the stored item, and from there in
the conversation (``harmony/items.py``: ``browser_page:N``), so a continuation's cursors go on.

Backends (``--browser_backend``): ``searxng:URL`` (a SearXNG instance's JSON API, ``format=json``),
``exa`` (``EXA_API_KEY``), ``youcom`` (``YDC_API_KEY``), or ``mcp:URL`` (an MCP server with
``search``/``open``/``find`` tools, e.g. gpt-oss's reference browser server: calls go through as they are
and its text is what the model reads; it keeps its own pages, so citations are not converted).
"""

from __future__ import annotations

import asyncio
import html.parser
import os
import re
import textwrap
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, unquote, urljoin, urlsplit

import httpx2
import orjson
from openai.types.responses.response_output_item import McpListToolsTool

from ..harmony.items import BROWSER_PAGE, BROWSER_PAGES, MODEL_READ, ItemKind
from .base import ToolOutcome, ToolProvider, truncate_output
from .fetch import FetchedPage, FetchRefused, guarded_get, parse_allow_private
from .mcp import MCPProvider
from .settings import ToolSettings

__all__ = ["BrowserProvider", "CitationRewriter", "browser_description", "html_to_text"]

#: Characters of numbered lines shown at once (the reference shows ~1024 tokens; ~4 characters a token).
VIEW_CHARS = 4096
WRAP_WIDTH = 80
PAGE_MAX_BYTES = 2 << 20
#: Characters of a page's text the conversation keeps (for later turns' open/find/citations).
STORED_PAGE_CHARS = 256 << 10
MAX_RESULTS = 10
_CITATION = re.compile(r"【(?P<cursor>\d+)†(?P<content>[^†】]+)(?:†[^†】]+)?】")
_LINK = re.compile(r"【\d+†(?P<content>[^†】]+)(?:†[^†】]+)?】")


def browser_description(backend: str) -> str:
    """The browser tool's instruction text, as the reference tool writes it (``sources=`` names the backend)."""
    source = backend.split(":", 1)[0]
    return (
        "Tool for browsing.\n"
        "The `cursor` appears in brackets before each browsing display: `[{cursor}]`.\n"
        "Cite information from the tool using the following format:\n"
        "`【{cursor}†L{line_start}(-L{line_end})?】`, for example: `【6†L9-L11】` or `【8†L3】`.\n"
        "Do not quote more than 10 words directly from the tool output.\n"
        f"sources={source}"
    )


class BrowserError(Exception):
    """A call the browser cannot serve; its message is what the model reads."""


# --------------------------------------------------------------------------------------------
# Pages
# --------------------------------------------------------------------------------------------


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


def _domain(url: str) -> str:
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
                self.parts.append(f"【{link_id}†{text}†{_domain(self._link)}】")
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


# --------------------------------------------------------------------------------------------
# Search backends
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SearchResult:
    url: str
    title: str
    snippet: str


class SearchBackend:
    def __init__(self, settings: ToolSettings) -> None:
        self.timeout = settings.tool_timeout

    async def search(self, query: str, topn: int) -> list[SearchResult]:
        raise NotImplementedError

    async def _json(self, method: str, url: str, **kwargs: Any) -> Any:
        async with httpx2.AsyncClient(timeout=httpx2.Timeout(self.timeout), trust_env=False) as client:
            response = await client.request(method, url, **kwargs)
        if response.status_code >= 400:
            raise BrowserError(f"The search backend answered HTTP {response.status_code}.")
        return response.json()


class SearxngBackend(SearchBackend):
    """A SearXNG instance (operator-configured, so it may be private): ``GET URL/search?q=…&format=json``."""

    def __init__(self, url: str, settings: ToolSettings) -> None:
        super().__init__(settings)
        self.url = url.rstrip("/")
        if not self.url.endswith("/search"):
            self.url += "/search"

    async def search(self, query: str, topn: int) -> list[SearchResult]:
        data = await self._json("GET", self.url, params={"q": query, "format": "json"})
        results = data.get("results") if isinstance(data, dict) else None
        return [
            SearchResult(str(r.get("url")), str(r.get("title") or r.get("url")), str(r.get("content") or ""))
            for r in (results or [])[:topn]
            if isinstance(r, dict) and r.get("url")
        ]


class ExaBackend(SearchBackend):
    """Exa's search API (``EXA_API_KEY``)."""

    base_url = "https://api.exa.ai"

    async def search(self, query: str, topn: int) -> list[SearchResult]:
        key = os.environ.get("EXA_API_KEY")
        if not key:
            raise BrowserError("The exa search backend has no EXA_API_KEY.")
        data = await self._json(
            "POST",
            f"{self.base_url}/search",
            headers={"x-api-key": key},
            json={"query": query, "numResults": topn, "contents": {"text": {"maxCharacters": 400}}},
        )
        return [
            SearchResult(str(r["url"]), str(r.get("title") or r["url"]), str(r.get("text") or ""))
            for r in data.get("results", [])
            if isinstance(r, dict) and r.get("url")
        ]


class YouComBackend(SearchBackend):
    """You.com's search API (``YDC_API_KEY``): ``results.web`` (v1), or ``hits`` (the older API)."""

    base_url = "https://api.ydc-index.io"

    async def search(self, query: str, topn: int) -> list[SearchResult]:
        key = os.environ.get("YDC_API_KEY")
        if not key:
            raise BrowserError("The youcom search backend has no YDC_API_KEY.")
        data = await self._json(
            "GET",
            f"{self.base_url}/v1/search",
            headers={"X-API-Key": key},
            params={"query": query, "count": topn},
        )
        if not isinstance(data, dict):
            raise BrowserError("The search backend answered something other than a JSON object.")
        results = data.get("results")
        web = (results.get("web") if isinstance(results, dict) else None) or data.get("hits") or []
        out = []
        for r in web[:topn]:
            if isinstance(r, dict) and r.get("url"):
                snippets = r.get("snippets") or [r.get("description") or ""]
                out.append(SearchResult(str(r["url"]), str(r.get("title") or r["url"]), str(snippets[0])))
        return out


def _backend(spec: str, settings: ToolSettings) -> SearchBackend:
    if spec.startswith("searxng:"):
        return SearxngBackend(spec[len("searxng:") :], settings)
    if spec == "exa":
        return ExaBackend(settings)
    if spec == "youcom":
        return YouComBackend(settings)
    raise ValueError(f"unknown browser backend {spec!r}")


# --------------------------------------------------------------------------------------------
# The provider
# --------------------------------------------------------------------------------------------


def _action(kind: str, **fields: Any) -> dict[str, Any]:
    return {"type": kind, **fields}


class BrowserProvider(ToolProvider):
    """``browser.search`` / ``.open`` / ``.find`` for one response, over its page stack."""

    namespace = "browser"
    item_kind = ItemKind.WEB_SEARCH_CALL

    def __init__(self, settings: ToolSettings, calls: Mapping[str, str] | None = None) -> None:
        self._settings = settings
        self._allow = parse_allow_private(settings.fetch_allow_private)
        self.pages: list[Page] = _stored_pages(calls or {})
        self._mcp: MCPProvider | None = None
        self._backend: SearchBackend | None = None
        if settings.browser_backend.startswith("mcp:"):
            self._mcp = MCPProvider(
                "browser", settings.browser_backend[len("mcp:") :], headers={}, settings=settings
            )
            self._mcp.tools = [
                McpListToolsTool(name=name, input_schema={"type": "object"})
                for name in ("search", "open", "find")
            ]
        else:
            self._backend = _backend(settings.browser_backend, settings)

    # -- the loop's seam -------------------------------------------------------------------

    def resume(self, calls: Mapping[str, str]) -> None:
        """The page stack is the conversation's: pages of replayed ``web_search_call`` items count too."""
        self.pages = _stored_pages(calls)

    def failure(self, message: str, code: int = -32603) -> ToolOutcome:
        return ToolOutcome({}, failed=True, internal={MODEL_READ: message})

    async def connect(self) -> ToolOutcome | None:
        if self._mcp is not None:
            return await self._mcp.connect()
        return None

    async def reset(self) -> None:
        if self._mcp is not None:
            await self._mcp.reset()

    async def aclose(self) -> None:
        if self._mcp is not None:
            await self._mcp.aclose()

    def text_rewriter(self) -> Callable[[], CitationRewriter] | None:
        if self._mcp is not None:
            return None
        return lambda: CitationRewriter(self.cite)

    def cite(self, cursor: int) -> tuple[str, str] | None:
        """(URL, title) that citations of page ``cursor`` point at (None: no such page, or a search page)."""
        if 0 <= cursor < len(self.pages):
            page = self.pages[cursor].cited
            if page.url:
                return page.url, page.title
        return None

    async def call(self, name: str, arguments: str) -> ToolOutcome:
        try:
            args = orjson.loads(arguments) if arguments.strip() else {}
        except orjson.JSONDecodeError:
            args = None
        if not isinstance(args, dict):
            return self._error(name, {}, "Invalid function arguments: a JSON object is expected.")
        if self._mcp is not None:
            return await self._via_mcp(name, args)
        try:
            if name == "search":
                return await self._search(args)
            if name == "open":
                return await self._open(args)
            if name == "find":  # scans the whole page: off the event loop
                return await asyncio.to_thread(self._find, args)
        except (BrowserError, FetchRefused) as exc:
            return self._error(name, args, str(exc))
        except (httpx2.HTTPError, ValueError) as exc:
            return self._error(name, args, f"The browser failed: {type(exc).__name__}: {exc}")
        return self._error(name, args, f"Unknown function: {name}")

    def _error(self, name: str, args: Mapping[str, Any], message: str) -> ToolOutcome:
        fields: dict[str, Any] = {}
        if name == "search":
            fields["action"] = _action("search", query=str(args.get("query") or ""))
        return ToolOutcome(fields, failed=True, internal={MODEL_READ: f"Error: {message}"})

    def _shown(self, action: dict[str, Any], display: str, sources: list[str] | None = None) -> ToolOutcome:
        """The outcome of a call that pushed a page (the last on the stack) and showed ``display``."""
        text = truncate_output(display, self._settings.tool_output_max_bytes)
        optional = {}
        if sources is not None:
            optional["web_search_call.action.sources"] = {
                "action": {**action, "sources": [{"type": "url", "url": url} for url in sources]}
            }
        internal = {MODEL_READ: text, BROWSER_PAGE: self.pages[-1].to_json()}
        return ToolOutcome({"action": action}, optional=optional, internal=internal)

    # -- search / open / find ----------------------------------------------------------------

    async def _search(self, args: Mapping[str, Any]) -> ToolOutcome:
        query = args.get("query")
        if not isinstance(query, str) or not query.strip():
            raise BrowserError("`query` must be a non-empty string.")
        assert self._backend is not None
        results = await self._backend.search(query, MAX_RESULTS)
        chunks = []
        urls: dict[str, str] = {}
        for i, result in enumerate(results):
            title = result.title.replace("】", "").replace("†", "")
            urls[str(i)] = result.url
            chunks.append(f"# 【{i}†{title}†{_domain(result.url)}】\n{' '.join(result.snippet.split())}")
        text = "\n\n".join(chunks) if chunks else f"No results for `{query}`."
        page = Page(url="", title=query, text=text, urls=urls, listing=True)
        display = self._push(page, 0, -1)
        return self._shown(_action("search", query=query), display, [r.url for r in results])

    async def _open(self, args: Mapping[str, Any]) -> ToolOutcome:
        link = args.get("id", -1)
        cursor = _int(args.get("cursor", -1), "cursor")
        loc = _int(args.get("loc", -1), "loc")
        num_lines = _int(args.get("num_lines", -1), "num_lines")
        if isinstance(link, str):
            page = await self._fetch(link)
        else:
            current = self._page(cursor)
            link_id = _int(link, "id")
            if link_id < 0:
                page = current
            else:
                url = current.urls.get(str(link_id))
                if url is None:
                    raise BrowserError(f"Invalid link id `{link_id}`.")
                if loc < 0 and str(link_id) in current.lines_at:
                    loc = max(0, current.lines_at[str(link_id)] - 4)
                page = await self._fetch(url)
        display = self._push(page, max(loc, 0), num_lines)
        return self._shown(_action("open_page", url=page.url), display)

    def _find(self, args: Mapping[str, Any]) -> ToolOutcome:
        pattern = args.get("pattern")
        if not isinstance(pattern, str) or not pattern:
            raise BrowserError("`pattern` must be a non-empty string.")
        cursor = _int(args.get("cursor", -1), "cursor")
        page = self._page(cursor)
        if page.listing:
            raise BrowserError("Cannot run `find` on search results page or find results page")
        lines = _LINK.sub(lambda m: m.group("content"), "\n".join(page.lines())).split("\n")
        needle = pattern.lower()
        chunks: list[str] = []
        at: dict[str, int] = {}
        i = 0
        while i < len(lines) and len(chunks) < 50:
            if needle in lines[i].lower():
                match = str(len(chunks))
                at[match] = i
                chunks.append(f"# 【{match}†match at L{i}】\n" + "\n".join(lines[i : i + 4]))
                i += 4
            else:
                i += 1
        found = Page(
            url=f"{page.url}/find?pattern={quote(pattern)}",
            title=f"Find results for text: `{pattern}` in `{page.title}`",
            text="\n\n".join(chunks) if chunks else f"No `find` results for pattern: `{pattern}`",
            urls={k: page.url for k in at},
            lines_at=at,
            listing=True,
            source=page,
            source_cursor=cursor if cursor >= 0 else len(self.pages) - 1,
        )
        display = self._push(found, 0, -1)
        return self._shown(_action("find_in_page", url=page.url, pattern=pattern), display)

    def _page(self, cursor: int) -> Page:
        if not self.pages:
            raise BrowserError("No pages to access!")
        if cursor == -1:
            return self.pages[-1]
        if not 0 <= cursor < len(self.pages):
            raise BrowserError(
                f"Cursor `{cursor}` is out of range. Available cursor indices: [0 - {len(self.pages) - 1}]."
            )
        return self.pages[cursor]

    async def _fetch(self, url: str) -> Page:
        try:
            fetched = await guarded_get(
                url, self._allow, timeout=self._settings.tool_timeout, max_bytes=PAGE_MAX_BYTES
            )
        except FetchRefused as exc:
            raise BrowserError(f"Error fetching URL `{url}`: {exc}") from None
        except httpx2.HTTPError as exc:
            raise BrowserError(f"Error fetching URL `{url}`: {type(exc).__name__}") from None
        return await asyncio.to_thread(_page_of, fetched)

    def _push(self, page: Page, loc: int, num_lines: int) -> str:
        """Put ``page`` on the stack and show lines from ``loc`` (the reference's browsing display)."""
        lines = page.lines()
        if loc >= len(lines):
            raise BrowserError(
                f"Invalid location parameter: `{loc}`. Cannot exceed page maximum of {len(lines) - 1}."
            )
        end = loc
        if num_lines > 0:
            end = min(loc + num_lines, len(lines))
        else:
            size = 0
            while end < len(lines) and (end == loc or size + len(lines[end]) + 8 <= VIEW_CHARS):
                size += len(lines[end]) + 8
                end += 1
        self.pages.append(page)
        cursor = len(self.pages) - 1
        body = "\n".join(f"L{i}: {lines[i]}" for i in range(loc, end))
        header = page.title + (f" ({unquote(page.url)})" if page.url else "")
        return f"[{cursor}] {header}\n**viewing lines [{loc} - {end - 1}] of {len(lines) - 1}**\n\n{body}"

    async def _via_mcp(self, name: str, args: dict[str, Any]) -> ToolOutcome:
        assert self._mcp is not None
        if name not in ("search", "open", "find"):
            return self._error(name, args, f"Unknown function: {name}")
        outcome = await self._mcp.call(name, orjson.dumps(args).decode())
        output = outcome.fields.get("output")
        text = output if isinstance(output, str) else f"Error: {outcome.fields.get('error')}"
        if name == "search":
            action = _action("search", query=str(args.get("query") or ""))
        elif name == "open":
            action = _action("open_page", url=args["id"] if isinstance(args.get("id"), str) else None)
        else:
            action = _action("find_in_page", url="", pattern=str(args.get("pattern") or ""))
        return ToolOutcome({"action": action}, failed=outcome.failed, internal={MODEL_READ: text})


def _page_of(fetched: FetchedPage) -> Page:
    """A fetched page as text, wrapped: in a worker thread (parsing a large page would stall the event loop)."""
    head = fetched.text.lstrip()[:15].lower()
    if "html" in fetched.content_type or head.startswith(("<!doctype", "<html")):
        title, text, urls = html_to_text(fetched.text, fetched.url)
    else:
        title, text, urls = "", fetched.text, {}
    page = Page(url=fetched.url, title=title or unquote(fetched.url), text=text, urls=urls)
    page.lines()
    return page


def _stored_pages(calls: Mapping[str, str]) -> list[Page]:
    """The conversation's page stack so far (pages pushed by earlier responses), cursors in order."""
    stack: list[Page] = []
    try:
        count = int(calls.get(BROWSER_PAGES) or 0)
        for i in range(count):
            stack.append(Page.from_json(orjson.loads(calls[f"browser_page:{i}"]), stack))
    except (KeyError, ValueError, TypeError, orjson.JSONDecodeError):
        return stack
    return stack


def _int(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise BrowserError(f"`{name}` should be an integer, not `{type(value).__name__}`")
    return value


# --------------------------------------------------------------------------------------------
# Citations in the final answer
# --------------------------------------------------------------------------------------------


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
        replacement = f"([{_domain(url)}]({url}))"
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
