"""The browser's search backends: SearXNG's JSON API, Exa, You.com (``--browser_backend``)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import httpx2

from ..settings import ToolSettings
from .pages import BrowserError

__all__ = ["ExaBackend", "SearchBackend", "SearchResult", "SearxngBackend", "YouComBackend", "search_backend"]


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


def search_backend(spec: str, settings: ToolSettings) -> SearchBackend:
    if spec.startswith("searxng:"):
        return SearxngBackend(spec[len("searxng:") :], settings)
    if spec == "exa":
        return ExaBackend(settings)
    if spec == "youcom":
        return YouComBackend(settings)
    raise ValueError(f"unknown browser backend {spec!r}")
