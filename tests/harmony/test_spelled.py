"""Control tokens spelled in ordinary tokens, read as the control tokens (``harmony/spelled.py``)."""

from __future__ import annotations

from trtllm_responses.harmony import HarmonyEncoding, parse_completion
from trtllm_responses.harmony.spelled import SpelledControlTokens

CALL = '<|channel|>commentary to=functions.f <|constrain|>json<|message|>{"a":"x<y"}<|call|>'


def _read(encoding: HarmonyEncoding, steps: list[list[int]]) -> list[int]:
    reader = SpelledControlTokens(encoding)
    out: list[int] = []
    for i, step in enumerate(steps):
        tokens, _ = reader.read(step, last=i == len(steps) - 1)
        out += tokens
    return out


def test_a_step_without_lt_is_returned_as_it_came(encoding: HarmonyEncoding) -> None:
    reader = SpelledControlTokens(encoding)
    step = tuple(encoding.encode_plain("hello world"))
    tokens, logprobs = reader.read(step)
    assert tokens is step and logprobs is None


def test_spelled_control_tokens_read_as_the_tokens_token_by_token(encoding: HarmonyEncoding) -> None:
    spelled = encoding.encode_plain(CALL)
    assert not set(spelled) & encoding.special_ids  # every control token is spelled here
    out = _read(encoding, [[t] for t in spelled])
    assert [t for t in out if t in encoding.special_ids] == [
        t for t in encoding.encode(CALL) if t in encoding.special_ids
    ]
    assert encoding.decode(out) == CALL  # the model's bytes, in order
    (message,) = parse_completion(encoding, out)
    assert message.header.recipient == "functions.f" and message.terminator == encoding.call
    assert message.text == '{"a":"x<y"}'


def test_a_token_straddling_a_control_token_is_split_into_bytes(encoding: HarmonyEncoding) -> None:
    text_token = encoding.encode_plain('"}<')  # one token on o200k holding the call's first byte
    rest = encoding.encode_plain("|call|>")
    out = _read(encoding, [text_token, rest])
    assert out[-1] == encoding.call
    assert encoding.decode(out[:-1]) == '"}'


def test_a_spelled_prefix_waits_for_the_next_step_and_is_text_when_the_generation_ends(
    encoding: HarmonyEncoding,
) -> None:
    reader = SpelledControlTokens(encoding)
    first, _ = reader.read(encoding.encode_plain("a <|cha"))
    assert encoding.decode(list(first)) == "a "
    rest, _ = reader.read([], last=True)
    assert encoding.decode(list(rest)) == "<|cha" and not set(rest) & encoding.special_ids


def test_text_that_is_not_a_control_token_stays_text(encoding: HarmonyEncoding) -> None:
    text = "a <b> <|notatoken|> c<|"
    out = _read(encoding, [encoding.encode_plain(text)])
    assert encoding.decode(out) == text and not set(out) & encoding.special_ids


def test_a_real_control_token_ends_a_spelled_prefix(encoding: HarmonyEncoding) -> None:
    out = _read(encoding, [encoding.encode_plain("x<|en") + [encoding.end]])
    assert out[-1] == encoding.end and encoding.decode(out[:-1]) == "x<|en"


def test_logprobs_follow_their_tokens(encoding: HarmonyEncoding) -> None:
    step = encoding.encode_plain("ab<|end|>")
    entries = [(-1.0 * (i + 1), [(t, -0.5)]) for i, t in enumerate(step)]
    reader = SpelledControlTokens(encoding)
    tokens, logprobs = reader.read(step, entries, last=True)
    assert logprobs is not None and len(logprobs) == len(tokens)
    assert tokens[-1] == encoding.end
    pieces = len(step) - (len(tokens) - 1)
    assert logprobs[-1][0] == sum(e[0] for e in entries[-pieces:])
