"""gpt-oss's browser as a server-run web_search, against a loopback SearXNG-compatible backend and pages.

The test serves a SearXNG-style JSON search endpoint and HTML pages on 127.0.0.1
(allowed explicitly with fetch_allow_private); the echo executor runs a ``#steps``
script: search → open → find → a final answer citing 【cursor†Lx-Ly】, which must
come back as url_citation annotations with the right offsets. Every stream goes
through check_stream.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

import httpx
import openai
import pytest
from support.search_site import TIDES, WEB_TOOL
from support.server_harness import RunningServer, ServerFactory, steps, stream_events
from support.stream_grammar import check_stream

from trtllm_responses.tools.browser import CitationRewriter, browser_description, html_to_text
from trtllm_responses.tools.browser.provider import OFFLINE, OFFLINE_INDEX
from trtllm_responses.tools.settings import ToolSettings


@pytest.fixture(scope="module")
def server_options(site: str) -> dict[str, Any]:
    settings = ToolSettings(
        browser_backend=f"searxng:{site}", fetch_allow_private=("127.0.0.1",), tool_timeout=10.0
    )
    return {"tools": settings}


def streamed(http: httpx.Client, body: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    events = stream_events(http, body)
    return check_stream(events), events


def test_search_open_find_and_cited_answer(http: httpx.Client, site: str) -> None:
    script = steps(
        'call browser.search {"query": "tides"}',
        'call browser.open {"id": 0}',
        'call browser.find {"pattern": "moon"}',
        "Tides follow the Moon 【1†L3-L4】; spring tides come at new moon 【2†L0】 and 【9†L1】 stays.",
    )
    body = {"input": script, "tools": [WEB_TOOL], "include": ["web_search_call.action.sources"]}
    response, events = streamed(http, body)
    assert response["status"] == "completed"
    calls = [i for i in response["output"] if i["type"] == "web_search_call"]
    assert [c["action"]["type"] for c in calls] == ["search", "open_page", "find_in_page"]
    assert all(c["status"] == "completed" for c in calls)
    search, opened, found = (c["action"] for c in calls)
    assert search["query"] == "tides"
    assert [s["url"] for s in search["sources"]] == [f"{site}/tides", f"{site}/neap"]
    assert opened["url"] == f"{site}/tides"
    assert found == {"type": "find_in_page", "url": f"{site}/tides", "pattern": "moon"}

    message = response["output"][-1]
    text = message["content"][0]["text"]
    link = f"([127.0.0.1]({site}/tides))"
    assert text == f"Tides follow the Moon {link}; spring tides come at new moon {link} and 【9†L1】 stays."
    annotations = message["content"][0]["annotations"]
    assert len(annotations) == 2
    for annotation in annotations:
        assert annotation["type"] == "url_citation" and annotation["url"] == f"{site}/tides"
        assert annotation["title"] == "Tides explained"
        assert text[annotation["start_index"] : annotation["end_index"]] == link
    streamed_annotations = [
        e["annotation"] for e in events if e["type"] == "response.output_text.annotation.added"
    ]
    assert streamed_annotations == annotations
    assert [
        e["annotation_index"] for e in events if e["type"] == "response.output_text.annotation.added"
    ] == [0, 1]
    deltas = "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")
    assert deltas == text, "the stream carries the rewritten text"
    kinds = [e["type"] for e in events if e["type"].startswith("response.web_search_call")]
    assert (
        kinds
        == [
            "response.web_search_call.in_progress",
            "response.web_search_call.searching",
            "response.web_search_call.completed",
        ]
        * 3
    )


def test_what_the_model_read(http: httpx.Client, site: str) -> None:
    script = steps('call browser.search {"query": "tides"}', 'call browser.open {"id": 0}', "read")
    response, _ = streamed(http, {"input": script, "tools": [WEB_TOOL]})
    assert "sources" not in response["output"][1]["action"], "sources only when included"
    # The continuation shows the browsing displays as the tool messages the model read.
    follow = http.post(
        "/v1/responses",
        json={"input": "#prompt", "previous_response_id": response["id"], "tools": [WEB_TOOL]},
    ).json()
    prompt = follow["output"][-1]["content"][0]["text"]
    assert "<|start|>browser.search to=assistant<|channel|>commentary<|message|>[0] tides\n" in prompt
    assert "L0: # 【0†Tides explained†127.0.0.1】\nL1: Why the sea rises and falls." in prompt
    assert f"[1] Tides explained ({site}/tides)\n**viewing lines [0 - " in prompt
    assert "L4: They are caused by the gravity of the Moon and the Sun." in prompt
    assert "not text" not in prompt and "color:red" not in prompt
    assert "【0†neap tides†127.0.0.1】" in prompt


def test_private_addresses_are_refused(http: httpx.Client, site: str) -> None:
    port = urlsplit(site).port
    for url in (
        f"http://127.0.0.2:{port}/tides",
        f"{site}/to-private",
        "http://169.254.169.254/latest/meta-data",
    ):
        script = steps(f"call browser.open {json.dumps({'id': url})}", "done")
        response, _ = streamed(http, {"input": script, "tools": [WEB_TOOL]})
        call = response["output"][1]
        assert call["type"] == "web_search_call" and call["status"] == "failed", url
        assert response["status"] == "completed"
    follow = http.post(
        "/v1/responses",
        json={"input": "#prompt", "previous_response_id": response["id"], "tools": [WEB_TOOL]},
    ).json()
    assert "not globally reachable" in follow["output"][-1]["content"][0]["text"]


def test_usage_errors_are_read_by_the_model(http: httpx.Client) -> None:
    script = steps('call browser.find {"pattern": "x"}', "read")
    response, _ = streamed(http, {"input": script, "tools": [WEB_TOOL]})
    assert response["output"][1]["status"] == "failed"
    follow = http.post(
        "/v1/responses",
        json={"input": "#prompt", "previous_response_id": response["id"], "tools": [WEB_TOOL]},
    ).json()
    assert "Error: No pages to access!" in follow["output"][-1]["content"][0]["text"]


def test_shown_with_the_reference_text_only_when_run(http: httpx.Client, echo_server: RunningServer) -> None:
    prompt = http.post("/v1/responses", json={"input": "#prompt", "tools": [WEB_TOOL]}).json()
    assert (
        "## browser\n\n// " + browser_description("searxng:x").split("\n")[0]
        in (prompt["output"][-1]["content"][0]["text"])
    )
    with httpx.Client(base_url=echo_server.base_url, timeout=30) as client:
        hidden = client.post("/v1/responses", json={"input": "#prompt", "tools": [WEB_TOOL]}).json()
    assert "## browser" not in hidden["output"][-1]["content"][0]["text"]


def test_citation_rewriter_holds_split_markers() -> None:
    rewriter = CitationRewriter(lambda cursor: ("https://e.com/a", "A") if cursor == 3 else None)
    out = []
    for piece in ["See 【", "3†L", "1-L2】 and 【x", "y】 and 【", "3†L9】"]:
        text, _ = rewriter.feed(piece)
        out.append(text)
    out.append(rewriter.flush())
    text = "".join(out)
    assert text == "See ([e.com](https://e.com/a)) and 【xy】 and ([e.com](https://e.com/a))"
    assert [text[a["start_index"] : a["end_index"]] for a in rewriter.annotations] == [
        "([e.com](https://e.com/a))"
    ] * 2


def test_html_to_text() -> None:
    title, text, urls = html_to_text(TIDES, "http://h/x")
    assert title == "Tides explained"
    assert "var moon" not in text and "Tides are the rise" in text
    assert urls == {"0": "http://h/neap"}


async def test_agents_sdk_web_search_tool(server: RunningServer, site: str) -> None:
    import openai
    from agents import Agent, OpenAIResponsesModel, RunConfig, Runner, WebSearchTool

    async with openai.AsyncOpenAI(
        base_url=server.base_url + "/v1", api_key="unused", max_retries=0
    ) as client:
        agent = Agent(
            name="searcher",
            instructions="Search the web.",
            model=OpenAIResponsesModel(model="gpt-oss", openai_client=client),
            tools=[WebSearchTool()],
        )
        script = steps(
            'call browser.search {"query": "tides"}', 'call browser.open {"id": 0}', "Moon 【1†L4】."
        )
        result = await Runner.run(agent, script, run_config=RunConfig(tracing_disabled=True))
    assert result.final_output == f"Moon ([127.0.0.1]({site}/tides))."
    calls = [
        item.raw_item
        for item in result.new_items
        if getattr(item.raw_item, "type", None) == "web_search_call"
    ]
    assert [c.action.type for c in calls] == ["search", "open_page"]  # type: ignore[union-attr]
    assert len(result.raw_responses) == 1
    message = result.raw_responses[0].output[-1]
    assert message.content[0].annotations[0].url == f"{site}/tides"  # type: ignore[union-attr]


def test_the_page_stack_lives_for_the_response_chain(http: httpx.Client, site: str) -> None:
    first, _ = streamed(
        http,
        {
            "input": steps('call browser.search {"query": "tides"}', 'call browser.open {"id": 0}', "ok"),
            "tools": [WEB_TOOL],
        },
    )
    script = steps(
        'call browser.find {"pattern": "moon", "cursor": 1}',
        'call browser.open {"id": 0, "cursor": 1}',
        "Moon 【2†L0】, neap 【3†L0】.",
    )
    body = {"input": script, "previous_response_id": first["id"], "tools": [WEB_TOOL]}
    second, _ = streamed(http, body)
    calls = [i for i in second["output"] if i["type"] == "web_search_call"]
    assert [c["status"] for c in calls] == ["completed", "completed"]
    assert calls[0]["action"] == {"type": "find_in_page", "url": f"{site}/tides", "pattern": "moon"}
    assert calls[1]["action"]["url"] == f"{site}/neap", "link 0 of cursor 1, a page of the first response"
    content = second["output"][-1]["content"][0]
    assert content["text"] == f"Moon ([127.0.0.1]({site}/tides)), neap ([127.0.0.1]({site}/neap))."
    assert [a["title"] for a in content["annotations"]] == ["Tides explained", "Neap tides"]


def test_external_web_access_false_uses_only_pages_already_fetched(
    http: httpx.Client, server: RunningServer, site: str
) -> None:
    """OpenAI: "When false, the web search tool runs in offline/cache-only mode and will not fetch new external
    content" (the SDK's ``WebSearchTool.external_web_access``). Here the cache is the conversation's page stack."""
    first, _ = streamed(
        http,
        {
            "input": steps('call browser.search {"query": "tides"}', 'call browser.open {"id": 0}', "ok"),
            "tools": [WEB_TOOL],
        },
    )
    before = httpx.get(f"{site}/_hits").json()
    assert before.count("/search") >= 1 and "/tides" in before
    offline = {"type": "web_search", "external_web_access": False}
    script = steps(
        'call browser.search {"query": "tides"}',
        f"call browser.open {json.dumps({'id': f'{site}/tides'})}",
        f"call browser.open {json.dumps({'id': f'{site}/neap'})}",
        'call browser.find {"pattern": "moon"}',
        "done",
    )
    second, _ = streamed(http, {"input": script, "previous_response_id": first["id"], "tools": [offline]})
    calls = [i for i in second["output"] if i["type"] == "web_search_call"]
    assert [(c["action"]["type"], c["status"]) for c in calls] == [
        ("search", "failed"),  # no live search
        ("open_page", "completed"),  # a page the conversation already fetched: shown again from the stack
        ("open_page", "failed"),  # a page it never fetched
        ("find_in_page", "completed"),
    ]
    assert second["tools"][0]["external_web_access"] is False
    assert httpx.get(f"{site}/_hits").json() == before, "nothing reached the search backend or the web"
    # The model is told in its instructions, and reads why each refused call failed.
    follow = http.post(
        "/v1/responses", json={"input": "#prompt", "previous_response_id": second["id"], "tools": [offline]}
    ).json()
    prompt = follow["output"][-1]["content"][0]["text"]
    assert "sources=searxng\n// " + OFFLINE in prompt
    assert prompt.count("Error: " + OFFLINE) == 1 and f"Error fetching URL `{site}/neap`: {OFFLINE}" in prompt
    # Through the SDK (strict): the tool echoes as the SDK types it; live access by default, as OpenAI's.
    with openai.OpenAI(
        base_url=server.base_url + "/v1", api_key="x", max_retries=0, _strict_response_validation=True
    ) as client:
        answer = client.responses.create(
            model="m",
            input=steps('call browser.search {"query": "tides"}', "done"),
            tools=[{"type": "web_search", "external_web_access": False}],
        )
        assert answer.output[1].type == "web_search_call" and answer.output[1].status == "failed"
        live = client.responses.create(
            model="m",
            input=steps('call browser.search {"query": "tides"}', "done"),
            tools=[{"type": "web_search"}],
        )
        assert live.output[1].status == "completed"


def test_an_offline_index_answers_searches_without_web_access(serve: ServerFactory, site: str) -> None:
    """``--browser_offline_backend``: the searches of ``external_web_access: false`` go to the operator's
    offline index, never to the live backend (here a closed port, so a search that reached it would fail)."""
    settings = ToolSettings(
        browser_backend="searxng:http://127.0.0.1:9",
        browser_offline_backend=f"searxng:{site}",
        tool_timeout=10.0,
    )
    script = steps('call browser.search {"query": "tides"}', "done")
    with serve(tools=settings) as running, httpx.Client(base_url=running.base_url, timeout=60) as client:
        offline = [{"type": "web_search", "external_web_access": False}]
        body = {"input": script, "tools": offline, "include": ["web_search_call.action.sources"]}
        answered = check_stream(stream_events(client, body))
        live = check_stream(stream_events(client, {"input": script, "tools": [WEB_TOOL]}))
        prompt = client.post("/v1/responses", json={"input": "#prompt", "tools": offline}).json()
    (call,) = [i for i in answered["output"] if i["type"] == "web_search_call"]
    assert call["status"] == "completed"
    assert [s["url"] for s in call["action"]["sources"]] == [f"{site}/tides", f"{site}/neap"]
    assert [i["status"] for i in live["output"] if i["type"] == "web_search_call"] == ["failed"]
    text = prompt["output"][-1]["content"][0]["text"]
    assert "sources=searxng\n// " + OFFLINE_INDEX in text


# -- the browser through an MCP server ---------------------------------------------------------------


def test_browser_through_an_mcp_server(serve: ServerFactory) -> None:
    from mcp.server.mcpserver import MCPServer
    from support.mcp_server import MCPTestServer, _serve

    browser = MCPServer("browser-test")
    seen: list[tuple[str, dict[str, Any]]] = []

    @browser.tool(description="Search.")
    def search(query: str, topn: int = 10) -> str:
        seen.append(("search", {"query": query}))
        return f"[0] {query}\nL0: # 【0†A result†example.com】"

    @browser.tool(description="Open.")
    def open(id: int | str = -1, cursor: int = -1) -> str:  # noqa: A001 - the reference tool's name
        seen.append(("open", {"id": id}))
        return "[1] A result (https://example.com/)\nL0: hello"

    mcp = MCPTestServer(url="", sse_url="")
    mcp.url = _serve(browser.streamable_http_app(), mcp) + "/mcp"
    running = serve(tools=ToolSettings(browser_backend=f"mcp:{mcp.url}"))
    try:
        with httpx.Client(base_url=running.base_url, timeout=60) as client:
            script = steps(
                'call browser.search {"query": "hello"}',
                'call browser.open {"id": "https://example.com/"}',
                "done",
            )
            response = check_stream(stream_events(client, {"input": script, "tools": [WEB_TOOL]}))
            follow = client.post(
                "/v1/responses",
                json={"input": "#prompt", "previous_response_id": response["id"], "tools": [WEB_TOOL]},
            ).json()
            # external_web_access: false: the MCP server (whose pages this server cannot see) is not asked.
            offline = [{"type": "web_search", "external_web_access": False}]
            refused = check_stream(stream_events(client, {"input": script, "tools": offline}))
    finally:
        running.stop()
        mcp.stop()
    assert [i["status"] for i in refused["output"] if i["type"] == "web_search_call"] == ["failed", "failed"]
    calls = [i for i in response["output"] if i["type"] == "web_search_call"]
    assert [(c["status"], c["action"]["type"]) for c in calls] == [
        ("completed", "search"),
        ("completed", "open_page"),
    ]
    assert calls[1]["action"]["url"] == "https://example.com/"
    assert seen == [("search", {"query": "hello"}), ("open", {"id": "https://example.com/"})]
    prompt = follow["output"][-1]["content"][0]["text"]
    assert "<|start|>browser.search to=assistant<|channel|>commentary<|message|>[0] hello" in prompt


async def test_exa_and_youcom_backends_parse_their_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    """The request each hosted backend makes and how its answer is read, against a loopback stand-in."""
    from trtllm_responses.tools.browser import ExaBackend, YouComBackend

    seen: list[tuple[str, str, dict[str, str], bytes]] = []

    class API(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            seen.append((self.command, self.path, dict(self.headers), body))
            if self.path.startswith("/search"):
                data = {"results": [{"url": "https://a.example/", "title": "A", "text": "about a"}]}
            else:
                data = {
                    "results": {"web": [{"url": "https://b.example/", "title": "B", "snippets": ["about b"]}]}
                }
            raw = json.dumps(data).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        do_GET = do_POST = _answer  # noqa: N815

        def log_message(self, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), API)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{httpd.server_address[1]}"
    monkeypatch.setenv("EXA_API_KEY", "exa-key")
    monkeypatch.setenv("YDC_API_KEY", "ydc-key")
    try:
        exa = ExaBackend(ToolSettings())
        exa.base_url = base
        youcom = YouComBackend(ToolSettings())
        youcom.base_url = base
        assert [(r.url, r.title, r.snippet) for r in await exa.search("q", 5)] == [
            ("https://a.example/", "A", "about a")
        ]
        assert [(r.url, r.title, r.snippet) for r in await youcom.search("q", 5)] == [
            ("https://b.example/", "B", "about b")
        ]
    finally:
        httpd.shutdown()
        httpd.server_close()
    (m1, p1, h1, b1), (m2, p2, h2, _) = seen
    assert (m1, p1, h1["x-api-key"], json.loads(b1)["query"]) == ("POST", "/search", "exa-key", "q")
    assert (m2, h2["X-API-Key"]) == ("GET", "ydc-key") and p2.startswith("/v1/search?query=q")
