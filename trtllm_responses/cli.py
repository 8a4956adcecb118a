"""The ``trtllm-responses`` command line.

    trtllm-responses render REQUEST.json [--tokens]   the Harmony prompt of a Responses request body
    trtllm-responses parse COMPLETION.txt [--ids]     the Responses output items of a Harmony completion
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path
from typing import Sequence

from .errors import APIError, VocabError

__all__ = ["main", "build_parser"]

logger = logging.getLogger("trtllm_responses")


def _read(path: str) -> str:
    return sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")


def cmd_render(args: argparse.Namespace) -> int:
    """Print the Harmony prompt (or its token ids) for a Responses request body."""
    from .harmony import HarmonyAdapter, load_encoding
    from .protocol import parse_request

    request = parse_request(_read(args.request))
    encoding = load_encoding()
    today = (lambda: args.date) if args.date else None
    adapter = HarmonyAdapter(encoding, today=today) if today else HarmonyAdapter(encoding)
    prompt = adapter.build_prompt(request)
    if args.tokens:
        print(json.dumps(prompt.token_ids))
    else:
        print(encoding.decode(prompt.token_ids))
    return 0


def cmd_parse(args: argparse.Namespace) -> int:
    """Print the output items of a Harmony completion (text with control tokens, or a JSON list of ids)."""
    from .harmony import completion_to_output_items, load_encoding, parse_completion

    encoding = load_encoding()
    raw = _read(args.completion)
    if args.ids:
        tokens = json.loads(raw)
    else:
        # A trailing newline left by an editor is not part of the completion.
        tokens = encoding.encode(raw[:-1] if raw.endswith("\n") else raw)
    items = completion_to_output_items(parse_completion(encoding, tokens))
    print(json.dumps([item.model_dump(mode="json", exclude_none=True) for item in items], indent=2, ensure_ascii=False))
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every sub-command."""
    parser = argparse.ArgumentParser(
        prog="trtllm-responses", description="OpenAI Responses API for gpt-oss on TensorRT-LLM."
    )
    sub = parser.add_subparsers(dest="command", required=True)

    render = sub.add_parser("render", help="print the Harmony prompt of a Responses request body")
    render.add_argument("request", help="request body JSON file ('-' for stdin)")
    render.add_argument("--tokens", action="store_true", help="print the token ids instead of text")
    render.add_argument("--date", help="conversation start date to render (default: today, UTC)")
    render.set_defaults(func=cmd_render)

    parse = sub.add_parser("parse", help="print the Responses output items of a Harmony completion")
    parse.add_argument("completion", help="completion text with Harmony control tokens ('-' for stdin)")
    parse.add_argument("--ids", action="store_true", help="the file holds a JSON list of token ids")
    parse.set_defaults(func=cmd_parse)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``trtllm-responses`` console script."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=getattr(args, "log_level", "info").upper(), format="%(levelname)s %(name)s: %(message)s")
    try:
        return int(args.func(args))
    except (APIError, VocabError, OSError, ValueError) as exc:
        message = exc.message if isinstance(exc, APIError) else str(exc)
        print(f"trtllm-responses {args.command}: {message}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
