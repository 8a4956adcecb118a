"""A loopback web for the browser tests: a SearXNG-compatible JSON search endpoint and HTML pages.

``/search?q=...&format=json`` answers two results (``/tides`` and ``/neap``); ``/tides`` and
``/neap`` are small HTML pages; ``/to-private`` redirects to 127.0.0.2 (a private address the
server must refuse unless allowed); ``/_hits`` answers the paths asked so far (itself left out), so a test
can see that nothing reached the site. Start it with :func:`serve_search_site`.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

__all__ = ["NEAP", "TIDES", "WEB_TOOL", "serve_search_site"]

#: The tool a request declares to get the server-run browser (backed by this site).
WEB_TOOL = {"type": "web_search"}

TIDES = """<!doctype html><html><head><title>Tides explained</title><style>p{color:red}</style></head>
<body><h1>Tides</h1>
<p>Tides are the rise and fall of sea levels.</p>
<p>They are caused by the gravity of the Moon and the Sun.</p>
<script>var moon = "not text";</script>
<p>Spring tides happen at full and new moon. See <a href="/neap">neap tides</a>.</p>
</body></html>"""
NEAP = "<html><head><title>Neap tides</title></head><body><p>Neap tides are weaker.</p></body></html>"


class _SearchSite(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        parts = urlsplit(self.path)
        base = f"http://127.0.0.1:{self.server.server_address[1]}"
        hits: list[str] = self.server.hits  # type: ignore[attr-defined]
        if parts.path == "/_hits":
            self._send(200, "application/json", json.dumps(hits))
            return
        hits.append(parts.path)
        if parts.path == "/search":
            query = parse_qs(parts.query)
            assert query.get("format") == ["json"]
            results = [
                {
                    "url": f"{base}/tides",
                    "title": "Tides explained",
                    "content": "Why the sea rises and falls.",
                },
                {"url": f"{base}/neap", "title": "Neap tides", "content": "Weaker tides."},
            ]
            self._send(200, "application/json", json.dumps({"query": query["q"][0], "results": results}))
        elif parts.path == "/tides":
            self._send(200, "text/html; charset=utf-8", TIDES)
        elif parts.path == "/neap":
            self._send(200, "text/html", NEAP)
        elif parts.path == "/to-private":
            port = self.server.server_address[1]
            self.send_response(302)
            self.send_header("Location", f"http://127.0.0.2:{port}/tides")
            self.send_header("Content-Length", "0")
            self.end_headers()
        else:
            self._send(404, "text/plain", "no")

    def _send(self, status: int, content_type: str, body: str) -> None:
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@contextmanager
def serve_search_site() -> Iterator[str]:
    """Serve the site on 127.0.0.1 (a free port) for the block; yields its base URL."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _SearchSite)
    httpd.hits = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
