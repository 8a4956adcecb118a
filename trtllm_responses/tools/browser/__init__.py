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
the conversation (``harmony/input_messages.py``: ``browser_page:N``), so a continuation's cursors go on.

Backends (``--browser_backend``): ``searxng:URL`` (a SearXNG instance's JSON API, ``format=json``),
``exa`` (``EXA_API_KEY``), ``youcom`` (``YDC_API_KEY``), or ``mcp:URL`` (an MCP server with
``search``/``open``/``find`` tools, e.g. gpt-oss's reference browser server: calls go through as they are
and its text is what the model reads; it keeps its own pages, so citations are not converted).

Modules: ``provider.py`` (BrowserProvider: the calls, the page stack), ``pages.py`` (pages, HTML to
text), ``search.py`` (the search backends), ``citations.py`` (citations to ``url_citation``).
"""

from .citations import CitationRewriter
from .pages import STORED_PAGE_CHARS, VIEW_CHARS, Page, html_to_text
from .provider import BrowserProvider, browser_description
from .search import ExaBackend, SearxngBackend, YouComBackend

__all__ = [
    "STORED_PAGE_CHARS",
    "VIEW_CHARS",
    "BrowserProvider",
    "CitationRewriter",
    "ExaBackend",
    "Page",
    "SearxngBackend",
    "YouComBackend",
    "browser_description",
    "html_to_text",
]
