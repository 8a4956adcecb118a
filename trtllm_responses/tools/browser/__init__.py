"""gpt-oss's ``browser`` tool as a server-run ``web_search``: search, open, find, and citations.

The semantics are the gpt-oss reference browser's (``gpt_oss/tools/simple_browser``): pages on a
stack kept with the response chain, shown in numbered windows, cited ``【CURSOR†L12-L14】`` and
rewritten into ``url_citation`` annotations; the backends are ``--browser_backend``'s.
docs/server-run-tools.md#gpt-osss-own-tools-python-code_interpreter-and-browser-web_search.

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
