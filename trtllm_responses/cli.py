"""The ``trtllm-responses`` command line.

trtllm-responses serve [MODEL] [flags]            serve the Responses API (echo executor without MODEL)
trtllm-responses render REQUEST.json [--tokens]   the Harmony prompt of a Responses request body
trtllm-responses parse COMPLETION.txt [--ids]     the Responses output items of a Harmony completion
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import APIError, VocabError

if TYPE_CHECKING:
    from .config import ServerConfig
    from .executors.base import Executor
    from .harmony import HarmonyEncoding
    from .tools.settings import ToolSettings

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
    from .http_limits import HTTPLimits
    from .tools.settings import PythonLimits, ToolSettings

    name = args.served_model_name or (Path(args.model).name if args.model else "gpt-oss")
    return ServerConfig(
        host=args.host,
        port=args.port,
        served_model_name=name,
        max_stored_responses=args.max_stored_responses,
        max_store_bytes=args.max_store_bytes,
        log_level=args.log_level,
        store=args.store,
        store_ttl=args.store_ttl,
        api_key=args.api_key or os.environ.get("TRTLLM_RESPONSES_API_KEY") or None,
        shutdown_timeout=args.shutdown_timeout,
        encryption_key_file=args.encryption_key_file,
        redact_reasoning=args.redact_reasoning,
        websocket_max_seconds=args.websocket_max_seconds,
        max_input_bytes=args.max_input_bytes,
        http=HTTPLimits(**{name: getattr(args, name) for name in HTTP_LIMIT_FLAGS}),
        tools=ToolSettings(
            mcp_allowed_urls=tuple(args.mcp_allowed_urls),
            tool_servers=tuple(args.tool_server),
            tool_timeout=args.tool_timeout,
            tool_output_max_bytes=args.tool_output_max_bytes,
            python_tool=args.python_tool,
            python_limits=PythonLimits(
                timeout=args.python_timeout,
                cpu_seconds=max(1, math.ceil(args.python_timeout)),
                memory_bytes=args.python_memory_mb << 20,
                output_bytes=args.tool_output_max_bytes,
            ),
            browser_backend=args.browser_backend,
            fetch_allow_private=tuple(args.fetch_allow_private),
        ),
    )


_TRTLLM_FLAGS = (
    "backend",
    "tokenizer",
    "max_batch_size",
    "max_num_tokens",
    "max_seq_len",
    "tp_size",
    "pp_size",
    "ep_size",
    "kv_cache_free_gpu_memory_fraction",
    "trust_remote_code",
    "extra_llm_api_options",
)


def _build_executor(args: argparse.Namespace, engine: str) -> tuple[Executor, HarmonyEncoding]:
    """The executor ``serve`` runs, and the encoding it uses; raises LaunchError before any GPU work."""
    from .executors.echo import EchoExecutor
    from .harmony import load_encoding
    from .launch import LaunchError, resolve_launch

    given = [f"--{flag}" for flag in _TRTLLM_FLAGS if getattr(args, flag) not in (None, False)]
    if engine == "echo":
        if given:
            raise LaunchError(
                f"{', '.join(given)} only apply to --engine trtllm; the echo executor has no model"
            )
        logger.warning(ECHO_BANNER)
        encoding = load_encoding()
        return EchoExecutor(encoding, tokens_per_second=args.echo_tokens_per_second), encoding
    if not args.model:
        raise LaunchError(
            "--engine trtllm needs MODEL: a Hugging Face id, a checkpoint folder or a bundle folder"
        )
    if args.echo_tokens_per_second:
        raise LaunchError("--echo_tokens_per_second only applies to --engine echo")
    plan = resolve_launch(args.model, vars(args), args.extra_llm_api_options)
    from .executors.trtllm import TrtllmUnavailableError, import_tensorrt_llm

    try:
        import_tensorrt_llm()
    except TrtllmUnavailableError as exc:
        raise LaunchError(str(exc)) from exc
    from .executors.trtllm import TrtllmExecutor, check_llm_arguments

    try:
        check_llm_arguments(plan.llm_kwargs, plan.backend)
    except ValueError as exc:
        raise LaunchError(str(exc)) from exc
    encoding = load_encoding(plan.bundle_dir)
    for key, source in sorted(plan.sources.items()):
        logger.info("LLM argument %s from %s", key, source)
    return TrtllmExecutor(plan.llm_kwargs, end_id=encoding.return_, backend=plan.backend), encoding


def cmd_serve(args: argparse.Namespace) -> int:
    """Start the server."""
    import uvicorn

    from .harmony import HarmonyAdapter
    from .server import create_app
    from .server.http_protocol import uvicorn_config
    from .store import open_store

    engine = args.engine or ("trtllm" if args.model else "echo")
    config = _server_config(args)
    executor, encoding = _build_executor(args, engine)
    _log_builtin_tools(config.tools)
    store = open_store(
        config.store, max_responses=config.max_stored_responses, max_bytes=config.max_store_bytes, ttl=config.store_ttl
    )
    app = create_app(config, executor, store, HarmonyAdapter(encoding))
    shutdown = app.state.shutdown

    class Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: Any) -> None:
            super().handle_exit(sig, frame)
            shutdown.begin()
            if sig == signal.SIGTERM and sig in self._captured_signals:
                # A graceful SIGTERM shutdown is a normal exit (0): uvicorn must not re-raise it.
                self._captured_signals.remove(sig)

    server_config = uvicorn_config(
        app,
        config.http,
        host=config.host,
        port=config.port,
        log_level=config.log_level,
        access_log=False,
        # Connections close by themselves once running responses end (by --shutdown_timeout at most,
        # then a terminal event): uvicorn waits a little longer before cancelling anything.
        timeout_graceful_shutdown=int(config.shutdown_timeout) + 10,
    )
    Server(server_config).run()
    return 0


def _log_builtin_tools(tools: ToolSettings) -> None:
    """Say what the operator turned on of gpt-oss's built-in tools, and what python ``local`` isolates here."""
    if tools.python_tool == "local":
        from .tools.python_tool import network_isolated

        if network_isolated():
            logger.warning("--python_tool local: model-written code runs here, limited, without network.")
        else:
            logger.warning(
                "--python_tool local: model-written code runs here, limited, WITH the server's network "
                "(this platform does not let a process enter a new network namespace; see README)."
            )
    elif tools.python_tool != "off":
        logger.info("--python_tool %s: code_interpreter calls go to that MCP server.", tools.python_tool)
    if tools.browser_backend != "off":
        logger.info("--browser_backend %s: web_search calls are run by the server.", tools.browser_backend)


def cmd_build(args: argparse.Namespace) -> int:
    """Build a serving bundle from a checkpoint."""
    from .build import build_bundle

    result = build_bundle(
        args.checkpoint,
        output_dir=args.output_dir,
        name=args.name,
        profile=args.profile,
        gpu=args.gpu,
        backend=args.backend,
        max_seq_len=args.max_seq_len,
        max_batch_size=args.max_batch_size,
        max_num_tokens=args.max_num_tokens,
        tp_size=args.tp_size,
        pp_size=args.pp_size,
        ep_size=args.ep_size,
        force=args.force,
        progress=lambda message: print(message, file=sys.stderr, flush=True),
    )
    print(result.path)
    return 0


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def _non_negative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value


def _non_negative_float(text: str) -> float:
    value = float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value


def _positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return value


def _python_tool(text: str) -> str:
    if text in ("off", "local") or (text.startswith("mcp:") and _is_http_url(text[4:])):
        return text
    raise argparse.ArgumentTypeError(f"expected off, local or mcp:http(s)://URL, got {text}")


def _browser_backend(text: str) -> str:
    if text in ("off", "exa", "youcom"):
        return text
    kind, _, url = text.partition(":")
    if kind in ("searxng", "mcp") and _is_http_url(url):
        return text
    raise argparse.ArgumentTypeError(f"expected off, exa, youcom, searxng:URL or mcp:URL, got {text}")


def _is_http_url(text: str) -> bool:
    from urllib.parse import urlsplit

    parts = urlsplit(text)
    return parts.scheme in ("http", "https") and bool(parts.hostname)


def _hosts_or_cidrs(text: str) -> list[str]:
    from .tools.fetch import parse_allow_private

    try:
        parse_allow_private(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return [p.strip() for p in text.split(",") if p.strip()]


#: ``serve`` flags that are fields of HTTPLimits (same names; defaults from HTTPLimits).
HTTP_LIMIT_FLAGS = (
    "max_head_bytes",
    "max_header_count",
    "timeout_request_head",
    "timeout_request_body",
    "timeout_keep_alive",
    "limit_concurrency",
)


def _add_http_limits(serve: argparse.ArgumentParser) -> None:
    from .http_limits import HTTPLimits

    d = HTTPLimits()
    group = serve.add_argument_group("HTTP limits (per connection; see README, 'HTTP limits')")
    group.add_argument(
        "--max_head_bytes",
        type=_positive_int,
        default=d.max_head_bytes,
        help=f"request line plus headers; longer URL 414, longer head 431 (default: {d.max_head_bytes})",
    )
    group.add_argument(
        "--max_header_count",
        type=_positive_int,
        default=d.max_header_count,
        help=f"header fields per request; more is 431 (default: {d.max_header_count})",
    )
    group.add_argument(
        "--timeout_request_head",
        type=_positive_float,
        default=d.timeout_request_head,
        help=f"seconds to receive a request head, from connecting or its first byte; then 408 "
        f"(default: {d.timeout_request_head:g})",
    )
    group.add_argument(
        "--timeout_request_body",
        type=_positive_float,
        default=d.timeout_request_body,
        help=f"seconds to receive a request body after its head; then 408 (default: {d.timeout_request_body:g})",
    )
    group.add_argument(
        "--timeout_keep_alive",
        type=_positive_float,
        default=d.timeout_keep_alive,
        help=f"seconds an idle keep-alive connection stays open (default: {d.timeout_keep_alive:g})",
    )
    group.add_argument(
        "--limit_concurrency",
        type=_positive_int,
        default=d.limit_concurrency,
        help=f"open connections or requests in flight beyond which requests get 503 "
        f"(default: {d.limit_concurrency})",
    )


def _url_prefixes(text: str) -> list[str]:
    from urllib.parse import urlsplit

    prefixes = [p.strip() for p in text.split(",") if p.strip()]
    for prefix in prefixes:
        parts = urlsplit(prefix)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise argparse.ArgumentTypeError(f"not an http(s) URL prefix: {prefix}")
    return prefixes


def _tool_server(text: str) -> tuple[str, str]:
    label, sep, url = text.partition("=")
    if not sep or not label or "." in label or not url.startswith(("http://", "https://")):
        raise argparse.ArgumentTypeError(f"expected LABEL=http(s)://URL, got {text}")
    return label, url


def _fraction(text: str) -> float:
    value = float(text)
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"must be in (0, 1], got {text}")
    return value


def _add_serve(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    serve = sub.add_parser(
        "serve",
        help="serve the Responses API",
        description="Serve the Responses API. Flags follow trtllm-serve; LLM arguments merge as flags < bundle < "
        "--extra_llm_api_options file.",
    )
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
        "--store",
        default="memory",
        help="where responses are stored: memory (default), sqlite:///PATH (durable), "
        "redis://HOST:PORT/DB (shared by replicas)",
    )
    serve.add_argument(
        "--store_ttl",
        type=int,
        default=0,
        help="Redis store: seconds an entry lives after its last use (0: until Redis evicts it)",
    )
    serve.add_argument(
        "--api_key",
        help="require 'Authorization: Bearer KEY' on /v1/* (also TRTLLM_RESPONSES_API_KEY)",
    )
    serve.add_argument(
        "--shutdown_timeout",
        type=_non_negative_float,
        default=30.0,
        help="on SIGTERM, seconds running responses get to finish before they are ended (default: 30)",
    )
    serve.add_argument(
        "--max_input_bytes",
        type=_non_negative_int,
        default=0,
        help="refuse larger request bodies before tokenizing them (400 context_length_exceeded); "
        "0: 16 bytes per token of the context window",
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
    _add_http_limits(serve)
    serve.add_argument(
        "--encryption_key_file",
        help="base64 32-byte key for encrypted reasoning/compaction (default: "
        "$TRTLLM_RESPONSES_ENCRYPTION_KEY, else one generated once in the cache folder)",
    )
    serve.add_argument(
        "--redact_reasoning",
        action="store_true",
        help="reasoning items carry only encrypted_content; reasoning text is not streamed",
    )
    serve.add_argument(
        "--websocket_max_seconds",
        type=_positive_float,
        default=3600.0,
        help="close WebSocket connections after this long (default: 3600)",
    )
    tools = serve.add_argument_group("server-run tools (MCP servers)")
    tools.add_argument(
        "--mcp_allowed_urls",
        type=_url_prefixes,
        default=[],
        metavar="PREFIX,...",
        help="URL prefixes a client's mcp tool may point the server at (default: none; mcp tools are refused)",
    )
    tools.add_argument(
        "--tool_server",
        type=_tool_server,
        action="append",
        default=[],
        metavar="LABEL=URL",
        help="an operator-configured MCP server, used for {type: mcp, server_label: LABEL} (repeatable)",
    )
    tools.add_argument(
        "--tool_timeout", type=_positive_float, default=60.0, help="seconds a tool call or listing may take"
    )
    tools.add_argument(
        "--tool_output_max_bytes",
        type=_positive_int,
        default=64 << 10,
        help="longest tool output the model reads; longer is truncated with a note (default: 65536)",
    )
    builtin = serve.add_argument_group("gpt-oss's built-in tools, run by the server (README: isolation)")
    builtin.add_argument(
        "--python_tool",
        type=_python_tool,
        default="off",
        metavar="{off,local,mcp:URL}",
        help="run code_interpreter calls (gpt-oss's python): local = a limited subprocess per call, "
        "mcp:URL = the python tool of that MCP server (default: off, the tool is not shown)",
    )
    builtin.add_argument(
        "--python_timeout",
        type=_positive_float,
        default=30.0,
        help="wall-clock seconds of one local python call",
    )
    builtin.add_argument(
        "--python_memory_mb", type=_positive_int, default=1024, help="address space of one local python call"
    )
    builtin.add_argument(
        "--browser_backend",
        type=_browser_backend,
        default="off",
        metavar="{off,exa,youcom,searxng:URL,mcp:URL}",
        help="run web_search calls (gpt-oss's browser) through this search backend; keys from EXA_API_KEY / "
        "YDC_API_KEY (default: off, the tool is not shown)",
    )
    builtin.add_argument(
        "--fetch_allow_private",
        type=_hosts_or_cidrs,
        default=[],
        metavar="HOST_OR_CIDR,...",
        help="private, loopback or link-local hosts the browser may fetch anyway (default: none)",
    )
    trt = serve.add_argument_group("TensorRT-LLM (--engine trtllm), as in trtllm-serve")
    trt.add_argument(
        "--backend", choices=["pytorch", "tensorrt"], help="TensorRT-LLM backend (default: pytorch)"
    )
    trt.add_argument("--tokenizer", help="tokenizer path or name for TensorRT-LLM")
    trt.add_argument("--max_batch_size", type=_positive_int, help="most requests scheduled at once")
    trt.add_argument("--max_num_tokens", type=_positive_int, help="most batched tokens per step")
    trt.add_argument(
        "--max_seq_len",
        type=_positive_int,
        help="most tokens of prompt plus output (default: from the model)",
    )
    trt.add_argument(
        "--tp_size", "--tensor_parallel_size", dest="tp_size", type=_positive_int, help="tensor parallelism"
    )
    trt.add_argument(
        "--pp_size",
        "--pipeline_parallel_size",
        dest="pp_size",
        type=_positive_int,
        help="pipeline parallelism",
    )
    trt.add_argument(
        "--ep_size",
        "--moe_expert_parallel_size",
        dest="ep_size",
        type=_positive_int,
        help="expert parallelism",
    )
    trt.add_argument(
        "--kv_cache_free_gpu_memory_fraction",
        "--free_gpu_memory_fraction",
        dest="kv_cache_free_gpu_memory_fraction",
        type=_fraction,
        help="free GPU memory fraction for the KV cache (default: 0.9)",
    )
    trt.add_argument(
        "--trust_remote_code", action="store_true", help="let Hugging Face code in the checkpoint run"
    )
    trt.add_argument(
        "--extra_llm_api_options",
        "--config",
        dest="extra_llm_api_options",
        help="YAML of LLM arguments (wins over all)",
    )
    serve.set_defaults(func=cmd_serve)


def _add_build(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    build = sub.add_parser("build", help="build a serving bundle engines/<name>/ from a gpt-oss checkpoint")
    build.add_argument("checkpoint", help="checkpoint folder (config.json, safetensors)")
    build.add_argument("--name", help="bundle name (default: the checkpoint folder's name)")
    build.add_argument("--output_dir", default="engines", help="where bundles go (default: engines/)")
    build.add_argument("--profile", choices=["latency", "throughput"], default="throughput")
    build.add_argument("--gpu", choices=["hopper", "blackwell"], default="blackwell")
    build.add_argument("--backend", choices=["pytorch", "tensorrt"], default="pytorch")
    build.add_argument("--max_seq_len", type=_positive_int)
    build.add_argument("--max_batch_size", type=_positive_int)
    build.add_argument("--max_num_tokens", type=_positive_int)
    build.add_argument("--tp_size", type=_positive_int, default=1)
    build.add_argument("--pp_size", type=_positive_int, default=1)
    build.add_argument("--ep_size", type=_positive_int)
    build.add_argument("--force", action="store_true", help="rebuild even when up to date")
    build.set_defaults(func=cmd_build)


def _add_bench(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from .bench import add_bench_arguments, cmd_bench

    bench = sub.add_parser("bench", help="load a Responses server and report latency and throughput")
    add_bench_arguments(bench)
    bench.set_defaults(func=cmd_bench)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every sub-command."""
    parser = argparse.ArgumentParser(
        prog="trtllm-responses", description="OpenAI Responses API for gpt-oss on TensorRT-LLM."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    _add_serve(sub)
    _add_build(sub)
    _add_bench(sub)

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
    if level not in ("DEBUG", "TRACE"):
        # The MCP client logs every HTTP exchange and session id at INFO: noise, and session ids are
        # credentials of a kind. Their warnings and errors still show.
        for name in ("httpx2", "mcp"):
            logging.getLogger(name).setLevel(logging.WARNING)
    try:
        return int(args.func(args))
    except (APIError, VocabError, OSError, ValueError, RuntimeError) as exc:
        message = exc.message if isinstance(exc, APIError) else str(exc)
        print(f"trtllm-responses {args.command}: {message}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
