"""What a tool-read carrier costs: sealing and opening a browser page's read fields (responses/sealing.py).

Two pages: the one ``builtin_tools.py`` opens (a ~1.9 MiB HTML page of 8,000 paragraphs and links,
repetitive, so it compresses well) and 256 KiB of the words of README.md and docs/ in random order (compresses a
little worse than prose). Each as a ``web_search_call`` carrier holds it: its text (capped at
STORED_PAGE_CHARS), its link map and the window the model read. Sealing runs on the event loop once
per browser call (when encrypted reasoning is asked for); opening once per replayed call.

    PYTHONPATH=. python benchmarks/tool_read.py [--runs 20]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from pathlib import Path

import orjson
from builtin_tools import PAGE

from trtllm_responses.harmony.input_messages import BROWSER_PAGE, MODEL_READ
from trtllm_responses.responses.sealing import ContentSealer
from trtllm_responses.tools.browser import STORED_PAGE_CHARS, VIEW_CHARS, Page, html_to_text


def main(runs: int) -> None:
    title, text, urls = html_to_text(PAGE.decode(), "http://127.0.0.1/big")
    measure(
        "the 1.9 MiB HTML page", Page(url="http://127.0.0.1/big", title=title, text=text, urls=urls), runs
    )
    root = Path(__file__).parent.parent
    words = [
        w
        for page in [root / "README.md", *sorted((root / "docs").glob("*.md"))]
        for w in page.read_text().split()
    ]
    rng = random.Random(0)
    prose = " ".join(rng.choice(words) for _ in range(STORED_PAGE_CHARS // 4))[:STORED_PAGE_CHARS]
    measure("256 KiB of shuffled words", Page(url="http://h/p", title="p", text=prose), runs)


def measure(name: str, page: Page, runs: int) -> None:
    text = page.text
    fields = {MODEL_READ: text[:VIEW_CHARS], BROWSER_PAGE: page.to_json()}
    plain = len(orjson.dumps({"type": "web_search_call", "fields": fields}))
    sealer = ContentSealer(b"k" * 32)
    seal, opened = [], []
    for _ in range(runs):
        start = time.perf_counter()
        blob = sealer.seal_tool_read("web_search_call", fields)
        seal.append(time.perf_counter() - start)
        assert blob is not None
        start = time.perf_counter()
        sealer.open_tool_read(blob, "input[0].encrypted_content")
        opened.append(time.perf_counter() - start)
    print(
        f"tool read of {name}: {plain / 1024:.0f} KiB of JSON -> "
        f"{len(blob) / 1024:.0f} KiB blob; seal p50 {statistics.median(seal) * 1e3:.2f} ms, "
        f"open p50 {statistics.median(opened) * 1e3:.2f} ms"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=20)
    main(parser.parse_args().runs)
