"""The ``trtllm-responses`` command line.

trtllm-responses serve [MODEL] [flags]            serve the Responses API (echo executor without MODEL)
trtllm-responses render REQUEST.json [--tokens]   the Harmony prompt of a Responses request body
trtllm-responses parse COMPLETION.txt [--ids]     the Responses output items of a Harmony completion
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from .errors import APIError, VocabError

if TYPE_CHECKING:
    from .config import ServerConfig

__all__ = ["build_parser", "main"]

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
        tokens = encoding.encode(raw.removesuffix("\n"))
    items = completion_to_output_items(parse_completion(encoding, tokens))
    print(
        json.dumps(
            [item.model_dump(mode="json", exclude_none=True) for item in items], indent=2, ensure_ascii=False
        )
    )
    return 0


ECHO_BANNER = (
    "No model: serving the deterministic ECHO executor. Responses are scripted from your input "
    "(see README, 'The echo executor'); pass MODEL with --engine trtllm to serve gpt-oss."
)


def _server_config(args: argparse.Namespace) -> ServerConfig:
    from .config import ServerConfig

    name = args.served_model_name or (Path(args.model).name if args.model else "gpt-oss")
    return ServerConfig(
        host=args.host,
        port=args.port,
        served_model_name=name,
        max_stored_responses=args.max_stored_responses,
        max_store_bytes=args.max_store_bytes,
        log_level=args.log_level,
    )


def cmd_serve(args: argparse.Namespace) -> int:
    """Start the server."""
    import uvicorn

    from .executors.echo import EchoExecutor
    from .harmony import HarmonyAdapter, load_encoding
    from .server import create_app
    from .store import ConversationHistoryStore

    engine = args.engine or ("trtllm" if args.model else "echo")
    if engine != "echo":
        raise ValueError("--engine trtllm is not available yet; use --engine echo")
    config = _server_config(args)
    encoding = load_encoding()
    logger.warning(ECHO_BANNER)
    executor = EchoExecutor(encoding, tokens_per_second=args.echo_tokens_per_second)
    store = ConversationHistoryStore(config.max_stored_responses, config.max_store_bytes)
    app = create_app(config, executor, store, HarmonyAdapter(encoding))
    uvicorn.run(app, host=config.host, port=config.port, log_level=config.log_level, access_log=False)
    return 0


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def _non_negative_float(text: str) -> float:
    value = float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value


def _add_serve(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    serve = sub.add_parser("serve", help="serve the Responses API")
    serve.add_argument(
        "model", nargs="?", help="Hugging Face id, checkpoint folder or bundle folder (none: echo)"
    )
    serve.add_argument(
        "--engine", choices=["trtllm", "echo"], help="executor (default: trtllm with MODEL, else echo)"
    )
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8000, help="port to bind (default: 8000)")
    serve.add_argument("--served_model_name", help="model name in responses and /v1/models")
    serve.add_argument(
        "--max_stored_responses", type=_positive_int, default=10_000, help="LRU bound on stored responses"
    )
    serve.add_argument(
        "--max_store_bytes", type=_positive_int, default=2 << 30, help="LRU bound on stored bytes"
    )
    serve.add_argument(
        "--log_level", default="info", choices=["critical", "error", "warning", "info", "debug", "trace"]
    )
    serve.add_argument(
        "--echo_tokens_per_second",
        type=_non_negative_float,
        default=0.0,
        help="pace the echo executor (0: unpaced)",
    )
    serve.set_defaults(func=cmd_serve)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every sub-command."""
    parser = argparse.ArgumentParser(
        prog="trtllm-responses", description="OpenAI Responses API for gpt-oss on TensorRT-LLM."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    _add_serve(sub)

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
    level = getattr(args, "log_level", "info").upper()
    logging.basicConfig(
        level="DEBUG" if level == "TRACE" else level, format="%(levelname)s %(name)s: %(message)s"
    )
    try:
        return int(args.func(args))
    except (APIError, VocabError, OSError, ValueError) as exc:
        message = exc.message if isinstance(exc, APIError) else str(exc)
        print(f"trtllm-responses {args.command}: {message}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
