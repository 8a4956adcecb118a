"""Plain text is tokenized by tiktoken over the Harmony vocab (harmony/encoding.py): the same tokens as
openai-harmony's own encoder, and a message's long text parts spliced into harmony's render token for token."""

from __future__ import annotations

import random

import pytest
from openai_harmony import Author, Message, Role

from trtllm_responses.harmony import HarmonyEncoding
from trtllm_responses.harmony.encoding import WHOLE_PART_CHARS
from trtllm_responses.harmony.linear import has_long_run

# Characters from every class the pre-tokenizer tells apart: cases, marks, digits of several scripts,
# whitespace of every kind, punctuation, apostrophes (contractions), CJK, emoji, private use, controls.
ALPHABET = (
    "aZéÉßĳǅſ"  # lower, upper, title case, ligatures
    "\u0301\u0308\u20dd"  # combining marks
    "09٣߃๓"  # digits of several scripts
    " \t\n\r\x0b\x0c\x1c\x85\u00a0\u2028\u3000"  # whitespace
    "'’\".,;:!?/\\-_=+*#@$%^&()[]{}<>|~`"
    "中文日本語한국어"
    "😀👍🏽\u200d"
    "\ue000\ue002\U000f0000"
)
WORDS = ["<|end|>", "<|start|>", "<|message|>", "don't", "HELLO", "World's", "x" * 300, " " * 300, "\n\n\n"]


def _random_text(rng: random.Random, length: int, runs: bool = True) -> str:
    words = WORDS if runs else [w for w in WORDS if len(w) < 100]
    out: list[str] = []
    while len(out) < length:
        if rng.random() < 0.05:
            out.append(rng.choice(words))
        else:
            out.append(rng.choice(ALPHABET))
    return "".join(out)


def test_plain_tokens_are_harmonys_on_random_text(encoding: HarmonyEncoding) -> None:
    """tiktoken's tokens are harmony's, long runs included (short enough here for harmony's quadratic
    merge); ``encode_plain`` cuts runs longer than MAX_RUN where harmony would not (``linear.py``), so it
    equals harmony on text without them."""
    rng = random.Random(27)
    for _ in range(400):
        text = _random_text(rng, rng.randrange(0, 600))
        harmony = encoding.harmony.encode(text, allowed_special=set(), disallowed_special=())
        assert encoding._encode_ordinary(text) == harmony, repr(text)
        if not has_long_run(text):
            assert encoding.encode_plain(text) == harmony, repr(text)


def _message(rng: random.Random, parts: list[str]) -> Message:
    role = rng.choice(["user", "tool", "assistant", "assistant_final"])
    content = [{"type": "text", "text": p} for p in parts]
    if role == "user":
        return Message.from_dict({"role": "user", "content": content})
    if role == "tool":
        return Message.from_dict(
            {"role": "tool", "name": "functions.shell", "content": content, "channel": "commentary"}
        ).with_recipient("assistant")
    channel = "final" if role == "assistant_final" else "analysis"
    return Message.from_dict({"role": "assistant", "content": content, "channel": channel})


def test_long_text_parts_are_spliced_into_harmonys_render(encoding: HarmonyEncoding) -> None:
    """Parts on both sides of WHOLE_PART_CHARS, one or several to a message: harmony tokenizes each part on
    its own, and so must the splice (a part's tokens never merge with its neighbour's)."""
    rng = random.Random(31)
    spliced = exact = 0
    for _ in range(150):
        lengths = [
            rng.choice([0, 5, WHOLE_PART_CHARS - 1, WHOLE_PART_CHARS, 900, 4000])
            for _ in range(rng.randint(1, 4))
        ]
        runs = rng.random() < 0.3
        parts = [_random_text(rng, n, runs)[:n] if n else "" for n in lengths]
        message = _message(rng, parts)
        splices = any(len(p) >= WHOLE_PART_CHARS for p in parts)
        spliced += splices
        ours, harmonys = encoding.render(message), encoding.harmony.render(message)
        if any(has_long_run(p) for p in parts):  # cut where harmony would not (linear.py): the same text
            assert encoding.decode(ours) == encoding.decode(harmonys)
        else:
            exact += splices
            assert ours == harmonys, [len(p) for p in parts]
    assert spliced > 50 and exact > 50  # the splice path was taken, and compared token for token


def test_a_part_that_spells_a_marker_is_still_its_own_text(encoding: HarmonyEncoding) -> None:
    """The marker is private-use text around a random nonce; a part that writes private-use text itself
    (or a marker of another render) is tokenized as that text, wherever it is."""
    other = "\ue002" + "0" * 12 + ".0\ue003"
    parts = [other * 30, "short \ue002", "y" * 400 + other]
    message = Message.from_dict({"role": "user", "content": [{"type": "text", "text": p} for p in parts]})
    assert encoding.render(message) == encoding.harmony.render(message)
    tool = Message.from_author_and_content(Author.new(Role.TOOL, "functions.f"), other * 40).with_channel(
        "commentary"
    )
    assert encoding.render(tool) == encoding.harmony.render(tool)


@pytest.mark.parametrize("text", ["=" * 100_000, "a" * 50_000 + " b", "中" * 30_000])
def test_a_pathological_part_renders_in_linear_time_to_the_same_text(
    encoding: HarmonyEncoding, text: str
) -> None:
    message = Message.from_role_and_content(Role.USER, text)
    tokens = encoding.render(message)
    assert (
        encoding.decode(tokens)
        == encoding.decode(encoding.harmony.render(Message.from_role_and_content(Role.USER, "")))[
            : -len("<|end|>")
        ]
        + text
        + "<|end|>"
    )


def test_control_tokens_in_text_are_found_by_their_shape_as_by_their_alternation(
    encoding: HarmonyEncoding,
) -> None:
    """``encode`` finds control tokens by their shape (``<|word|>``), not by an alternation of all 1,100 (0.36 s
    to compile in every process): the same tokens on texts of control tokens, their fragments and near misses;
    harmony's own reading of them agrees."""
    import regex

    from trtllm_responses.harmony.encoding import _special_pattern

    specials = encoding._special_by_text
    assert encoding._special_pattern.pattern == r"<\|[A-Za-z0-9_]+\|>"
    alternation = regex.compile("|".join(regex.escape(t) for t in sorted(specials, key=len, reverse=True)))

    def by_alternation(text: str) -> list[int]:
        tokens: list[int] = []
        position = 0
        for match in alternation.finditer(text):
            tokens += encoding.encode_plain(text[position : match.start()])
            tokens.append(specials[match.group()])
            position = match.end()
        return tokens + encoding.encode_plain(text[position:])

    rng = random.Random(7)
    pieces = [*list(specials)[:30], "<|reserved_200017|>", "<|", "|>", "<|foo|>", "<|end", "end|>", "<", "|"]
    pieces += ["<|<|end|>", "<|x_1|>", "<|reserved_999999|>", " prose ", "<|<|", "|>|>", "é"]
    for _ in range(3000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 12)))
        assert encoding.encode(text) == by_alternation(text), text
        assert encoding.encode(text) == encoding.harmony.encode(text, allowed_special="all"), text
    # A vocabulary whose control tokens do not all have the shape gets the alternation.
    assert _special_pattern(["<|end|>", "[END]"]).pattern == r"<\|end\|>|\[END\]"
