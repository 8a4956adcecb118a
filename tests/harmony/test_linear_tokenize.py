"""Linear-time tokenizing: ordinary text encodes token for token as openai-harmony does; pathological
runs decode to the same text and never reach harmony longer than the bound."""

from __future__ import annotations

import base64
import inspect
import json
import random
import textwrap

import pytest
from openai_harmony import DeveloperContent, Message, Role, ToolDescription
from support.paths import DATA, ROOT

import trtllm_responses.responses.service
from trtllm_responses.harmony import HarmonyEncoding
from trtllm_responses.harmony.linear import LONG_RUN, MAX_RUN, has_long_run, linear_encode, split_points

ZH = (
    "自然语言处理是人工智能的一个重要分支，它研究如何让计算机理解和生成人类语言。近年来，大型语言模型"
    "取得了显著进展，在翻译、问答和代码生成等任务上表现出色。然而，这些模型仍然面临幻觉、偏见和计算成本"
    "等挑战，研究人员正在探索更高效、更可靠的方法。"
)
JA = "吾輩は猫である。名前はまだ無い。どこで生れたかとんと見当がつかぬ。何でも薄暗いじめじめした所でニャーニャー泣いていた事だけは記憶している。"


def _corpus() -> dict[str, str]:
    rng = random.Random(7)
    root = ROOT
    return {
        # The README as it was before its sections moved into docs/: the front door and the manual's pages.
        "readme": "\n".join(
            page.read_text(encoding="utf-8")
            for page in [root / "README.md", *sorted((root / "docs").glob("*.md"))]
        ),
        "python": inspect.getsource(trtllm_responses.responses.service) + inspect.getsource(textwrap),
        "json": json.dumps(
            json.loads((DATA / "openresponses-openapi.json").read_text())["components"]["schemas"][
                "CreateResponseBody"
            ],
            indent=2,
        ),
        # A long CJK paragraph without whitespace: longer than MAX_RUN, cut only at certain boundaries.
        "chinese": ZH * 6,
        "japanese": JA * 8,
        "base64": base64.b64encode(rng.randbytes(6000)).decode(),
        "url": "https://example.com/" + "/".join(f"segment-{rng.random():.6f}" for _ in range(60)),
        "mixed": "Grüße, naïve café — ünïcödé “quotes” 😀👍🏽 and tabs\t\tand\r\nCRLF lines. " * 30,
    }


@pytest.mark.parametrize("name", list(_corpus()))
def test_ordinary_text_encodes_as_harmony_does(encoding: HarmonyEncoding, name: str) -> None:
    text = _corpus()[name]
    harmony = encoding.harmony.encode(text, allowed_special=set(), disallowed_special=())
    assert encoding.encode_plain(text) == harmony
    assert encoding.encode(text + "<|end|>") == encoding.harmony.encode(
        text + "<|end|>", allowed_special="all"
    )


def test_long_cjk_paragraphs_are_cut_only_where_harmony_cuts(encoding: HarmonyEncoding) -> None:
    text = ZH * 6
    assert has_long_run(text) and split_points(text)  # cut, yet identical (previous test)


PATHOLOGICAL = {
    "equals": "=" * 100_000,
    "letters": "a" * 200_000,
    "cjk": "中" * 50_000,
    "spaces": " " * 50_000 + "x",
    "newlines": "\n" * 50_000,
    "marks": "=\u0301" * 30_000,
    "emoji": "😀" * 30_000,
    "unit-separator": "=\x1c" * 30_000,  # \x1c is whitespace to Python, not to the tokenizer
    "word-then-run": "hello " + "b" * 10_000 + " world",
}


@pytest.mark.parametrize("name", list(PATHOLOGICAL))
def test_pathological_runs_decode_to_the_same_text(encoding: HarmonyEncoding, name: str) -> None:
    text = PATHOLOGICAL[name]
    handed: list[str] = []

    def encode(part: str) -> list[int]:
        handed.append(part)
        return encoding.harmony.encode(part, allowed_special=set(), disallowed_special=())

    tokens = linear_encode(encode, text)
    assert encoding.decode(tokens) == text
    assert "".join(handed) == text
    # No part handed to harmony holds a run it would merge in quadratic time.
    assert all(len(run.group()) <= MAX_RUN for part in handed for run in LONG_RUN.finditer(part))


def test_render_is_harmony_render_for_ordinary_messages(encoding: HarmonyEncoding) -> None:
    for text in _corpus().values():
        message = Message.from_role_and_content(Role.USER, text)
        assert encoding.render(message) == encoding.harmony.render(message)


def test_render_of_pathological_messages_decodes_as_harmony_renders(encoding: HarmonyEncoding) -> None:
    tools = [
        ToolDescription.new(
            "lookup",
            "Finds " + "-" * 3000,
            parameters={"type": "object", "properties": {"q": {"type": "string", "description": "q" * 900}}},
        )
    ]
    content = DeveloperContent.new().with_instructions("Be brief. " + "=" * 5000).with_function_tools(tools)
    for message in (
        Message.from_role_and_content(Role.DEVELOPER, content),
        Message.from_role_and_content(Role.USER, "x " + "a" * 20_000 + " y"),
        Message.from_role_and_content(Role.ASSISTANT, "=" * 3000).with_channel("final"),
    ):
        assert encoding.decode(encoding.render(message)) == encoding.decode(encoding.harmony.render(message))


def test_the_ascii_check_finds_exactly_the_runs_long_run_finds() -> None:
    """``has_long_run`` classifies ASCII text a byte at a time (fast); it must agree with LONG_RUN itself,
    runs of MAX_RUN - 1, MAX_RUN and MAX_RUN + 1 of every class included."""
    rng = random.Random(27)
    pieces = [
        " ",
        "\t",
        "\n",
        "\x0b",
        "\x0c",
        "\r",
        "\x1c",
        "\x1f",
        "0",
        "7",
        "a",
        "Z",
        "_",
        "-",
        "=",
        "\x00",
        "\x7f",
    ]
    texts = []
    for _ in range(400):
        parts = []
        for _ in range(rng.randint(1, 6)):
            char = rng.choice(pieces)
            parts.append(char * rng.choice([1, 3, MAX_RUN - 1, MAX_RUN, MAX_RUN + 1]))
            parts.append("".join(rng.choice(pieces) for _ in range(rng.randint(0, 8))))
        texts.append("".join(parts))
    texts += [
        "x" * (MAX_RUN - 1) + "\x1c" + "y",
        "a" * 200 + "\x1e" * 100,
        " " * 128 + "\t" * 128,
        "9" * 1000,
    ]
    found = 0
    for text in texts:
        expected = len(text) >= MAX_RUN and LONG_RUN.search(text) is not None
        assert has_long_run(text) is expected, repr(text[:80])
        found += expected
    assert 0 < found < len(texts)  # both answers were exercised
