"""BrowserProvider: gpt-oss's ``browser`` tool run by the server (search, open, find) on a page stack."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import quote, unquote

import httpx2
import orjson
from openai.types.responses.response_output_item import McpListToolsTool

from ...harmony import BROWSER_PAGE, BROWSER_PAGES, MODEL_READ, ItemKind
from ..base import ToolOutcome, ToolProvider, truncate_output
from ..fetch import FetchedPage, FetchRefused, guarded_get, parse_allow_private
from ..mcp import MCPProvider
from ..settings import ToolSettings
from .citations import CitationRewriter
from .pages import (
    MAX_RESULTS,
    PAGE_MAX_BYTES,
    VIEW_CHARS,
    BrowserError,
    Page,
    URLRefused,
    domain,
    html_to_text,
    int_argument,
)
from .search import SearchBackend, search_backend

__all__ = ["BrowserProvider", "browser_description"]

_LINK = re.compile(r"【\d+†(?P<content>[^†】]+)(?:†[^†】]+)?】")


#: What the model reads when live web access is off (``external_web_access: false``), in its instructions and
#: as the error of a call that would reach the web.
OFFLINE = (
    "Live web access is off for this conversation: `search` and opening a page not shown before are "
    "unavailable; `open` and `find` work on the pages already shown."
)
#: The same, when the operator configured an offline index (``--browser_offline_backend``).
OFFLINE_INDEX = (
    "Live web access is off for this conversation: `search` answers from an offline index; opening a page "
    "not shown before is unavailable; `open` and `find` work on the pages already shown."
)


def browser_description(backend: str, external_web_access: bool = True, offline_backend: str = "off") -> str:
    """The browser tool's instruction text, as the reference tool writes it (``sources=`` names the backend);
    without live web access, followed by :data:`OFFLINE` (or :data:`OFFLINE_INDEX`, naming the offline
    backend in ``sources=``)."""
    if not external_web_access and offline_backend != "off":
        backend = offline_backend
    source = backend.split(":", 1)[0]
    return (
        "Tool for browsing.\n"
        "The `cursor` appears in brackets before each browsing display: `[{cursor}]`.\n"
        "Cite information from the tool using the following format:\n"
        "`【{cursor}†L{line_start}(-L{line_end})?】`, for example: `【6†L9-L11】` or `【8†L3】`.\n"
        "Do not quote more than 10 words directly from the tool output.\n"
        f"sources={source}"
    ) + ("" if external_web_access else "\n" + (OFFLINE if offline_backend == "off" else OFFLINE_INDEX))


def _action(kind: str, **fields: Any) -> dict[str, Any]:
    return {"type": kind, **fields}


class BrowserProvider(ToolProvider):
    """``browser.search`` / ``.open`` / ``.find`` for one response, over its page stack.

    ``external_web_access=False`` (the request's ``web_search`` tool said so): nothing reaches the web or
    the live search backend. ``search`` goes to ``--browser_offline_backend`` (an index the operator
    vouches is offline or cached), or is refused without one; ``open`` shows again a page already on the
    stack (the conversation's cache) and refuses any other; ``find`` and scrolling work as ever. Through
    an MCP backend (whose pages this server cannot see) only ``find`` is sent.
    """

    namespace = "browser"
    item_kind = ItemKind.WEB_SEARCH_CALL

    def __init__(
        self,
        settings: ToolSettings,
        calls: Mapping[str, str] | None = None,
        *,
        external_web_access: bool = True,
    ) -> None:
        self._settings = settings
        self.external_web_access = external_web_access
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
            self._backend = search_backend(settings.browser_backend, settings)
        if not external_web_access:  # the live backend is never asked
            offline = settings.browser_offline_backend
            self._backend = search_backend(offline, settings) if offline != "off" else None

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
            if not self.external_web_access and name != "find":
                return self._error(name, args, OFFLINE)
            return await self._via_mcp(name, args)
        try:
            if name == "search":
                return await self._search(args)
            if name == "open":
                return await self._open(args)
            if name == "find":  # scans the whole page: off the event loop
                return await asyncio.to_thread(self._find, args)
        except BrowserError as exc:
            return self._error(name, args, str(exc), exc.error_type)
        except FetchRefused as exc:
            return self._error(name, args, str(exc), URLRefused.error_type)
        except (httpx2.HTTPError, ValueError) as exc:
            message = f"The browser failed: {type(exc).__name__}: {exc}"
            return self._error(name, args, message, type(exc).__qualname__)
        return self._error(name, args, f"Unknown function: {name}")

    def _error(
        self, name: str, args: Mapping[str, Any], message: str, error_type: str = BrowserError.error_type
    ) -> ToolOutcome:
        fields: dict[str, Any] = {}
        if name == "search":
            fields["action"] = _action("search", query=str(args.get("query") or ""))
        internal = {MODEL_READ: f"Error: {message}"}
        return ToolOutcome(fields, failed=True, internal=internal, error_type=error_type)

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
        if self._backend is None:  # live access off and no offline index
            raise BrowserError(OFFLINE)
        results = await self._backend.search(query, MAX_RESULTS)
        chunks = []
        urls: dict[str, str] = {}
        for i, result in enumerate(results):
            title = result.title.replace("】", "").replace("†", "")
            urls[str(i)] = result.url
            chunks.append(f"# 【{i}†{title}†{domain(result.url)}】\n{' '.join(result.snippet.split())}")
        text = "\n\n".join(chunks) if chunks else f"No results for `{query}`."
        page = Page(url="", title=query, text=text, urls=urls, listing=True)
        display = self._push(page, 0, -1)
        return self._shown(_action("search", query=query), display, [r.url for r in results])

    async def _open(self, args: Mapping[str, Any]) -> ToolOutcome:
        link = args.get("id", -1)
        cursor = int_argument(args.get("cursor", -1), "cursor")
        loc = int_argument(args.get("loc", -1), "loc")
        num_lines = int_argument(args.get("num_lines", -1), "num_lines")
        if isinstance(link, str):
            page = await self._fetch(link)
        else:
            current = self._page(cursor)
            link_id = int_argument(link, "id")
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
        cursor = int_argument(args.get("cursor", -1), "cursor")
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
        if not self.external_web_access:  # only what the conversation has already fetched
            for page in reversed(self.pages):
                if page.url == url and not page.listing:
                    return page
            raise BrowserError(f"Error fetching URL `{url}`: {OFFLINE}")
        try:
            fetched = await guarded_get(
                url, self._allow, timeout=self._settings.tool_timeout, max_bytes=PAGE_MAX_BYTES
            )
        except FetchRefused as exc:
            raise URLRefused(f"Error fetching URL `{url}`: {exc}") from None
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
        return ToolOutcome(
            {"action": action},
            failed=outcome.failed,
            internal={MODEL_READ: text},
            error_type=outcome.error_type,
        )


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
