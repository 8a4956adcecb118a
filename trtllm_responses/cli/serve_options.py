"""The flags of ``trtllm-responses serve``: their definitions, their checks, and the ServerConfig they make.

Each flag is checked as it is parsed (a bad value is argparse's usage error naming the flag),
so a server never starts on a value it would refuse later.
"""

from __future__ import annotations

import argparse
import math
import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..server.config import ServerConfig

__all__ = ["HTTP_LIMIT_FLAGS", "SAMPLING_FLAGS", "add_serve_arguments", "positive_int", "server_config"]

#: ``serve`` flags that are fields of SamplingDefaults (same names).
SAMPLING_FLAGS = ("temperature", "top_p", "top_k", "min_p", "frequency_penalty", "presence_penalty")


def server_config(args: argparse.Namespace) -> ServerConfig:
    """The server configuration ``serve``'s flags describe."""
    from ..responses.sampling import SamplingDefaults
    from ..server.config import ServerConfig
    from ..server.http_limits import HTTPLimits
    from ..tools.settings import PythonLimits, ToolSettings

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
        reasoning_summaries=args.reasoning_summaries,
        websocket_max_seconds=args.websocket_max_seconds,
        max_input_bytes=args.max_input_bytes,
        render_workers=args.render_workers,
        prompts=args.prompts,
        http=HTTPLimits(**{name: getattr(args, name) for name in HTTP_LIMIT_FLAGS}),
        sampling=SamplingDefaults(**{name: getattr(args, name) for name in SAMPLING_FLAGS}),
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


def positive_int(text: str) -> int:
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
    from ..tools.fetch import parse_allow_private

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
    "max_connections_per_client",
)


def _add_http_limits(serve: argparse.ArgumentParser) -> None:
    from ..server.http_limits import HTTPLimits

    d = HTTPLimits()
    group = serve.add_argument_group("HTTP limits (per connection; see README, 'HTTP limits')")
    group.add_argument(
        "--max_head_bytes",
        type=positive_int,
        default=d.max_head_bytes,
        help=f"request line plus headers; longer URL 414, longer head 431 (default: {d.max_head_bytes})",
    )
    group.add_argument(
        "--max_header_count",
        type=positive_int,
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
        type=positive_int,
        default=d.limit_concurrency,
        help=f"open connections or requests in flight beyond which requests get 503 "
        f"(default: {d.limit_concurrency})",
    )
    group.add_argument(
        "--max_connections_per_client",
        type=_non_negative_int,
        default=d.max_connections_per_client,
        help=f"open connections from one client address; one more gets 503 and is closed; 0: no limit "
        f"(default: {d.max_connections_per_client})",
    )


def _ranged(low: float, high: float, *, low_open: bool = False):  # type: ignore[no-untyped-def]
    def check(text: str) -> float:
        value = float(text)
        if not (low < value if low_open else low <= value) or value > high or math.isnan(value):
            raise argparse.ArgumentTypeError(
                f"must be in {'(' if low_open else '['}{low:g}, {high:g}], got {text}"
            )
        return value

    return check


def _add_sampling(serve: argparse.ArgumentParser) -> None:
    from ..responses.sampling import SamplingDefaults

    d = SamplingDefaults()
    group = serve.add_argument_group("sampling defaults (a request's own fields win; README, 'Sampling')")
    group.add_argument(
        "--temperature",
        type=_ranged(0.0, 2.0),
        default=d.temperature,
        help=f"temperature of requests that set none (default: {d.temperature:g}; 0 is greedy)",
    )
    group.add_argument(
        "--top_p",
        type=_ranged(0.0, 1.0, low_open=True),
        default=d.top_p,
        help=f"top_p of requests that set none (default: {d.top_p:g})",
    )
    group.add_argument(
        "--top_k",
        type=_non_negative_int,
        default=None,
        help="top_k of requests that set none (default: unset)",
    )
    group.add_argument(
        "--min_p",
        type=_ranged(0.0, 1.0),
        default=None,
        help="min_p of requests that set none (default: unset)",
    )
    group.add_argument(
        "--frequency_penalty",
        type=_ranged(-2.0, 2.0),
        default=None,
        help="frequency_penalty of requests that set none (default: unset)",
    )
    group.add_argument(
        "--presence_penalty",
        type=_ranged(-2.0, 2.0),
        default=None,
        help="presence_penalty of requests that set none (default: unset)",
    )


def _url_prefixes(text: str) -> list[str]:
    prefixes = [p.strip() for p in text.split(",") if p.strip()]
    for prefix in prefixes:
        if not _is_http_url(prefix):
            raise argparse.ArgumentTypeError(f"not an http(s) URL prefix: {prefix}")
    return prefixes


def _tool_server(text: str) -> tuple[str, str]:
    label, sep, url = text.partition("=")
    if not sep or not label or "." in label or not url.startswith(("http://", "https://")):
        raise argparse.ArgumentTypeError(f"expected LABEL=http(s)://URL, got {text}")
    return label, url


def add_serve_arguments(serve: argparse.ArgumentParser) -> None:
    """Every flag of ``trtllm-responses serve``, each checked as it is parsed."""
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
        "--max_stored_responses", type=positive_int, default=10_000, help="LRU bound on stored responses"
    )
    serve.add_argument(
        "--max_store_bytes", type=positive_int, default=2 << 30, help="LRU bound on stored bytes"
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
        "--render_workers",
        type=_non_negative_int,
        default=0,
        help="worker processes rendering large inputs off the event loop, ~130 MiB each; "
        "0: one a core, at most 4",
    )
    serve.add_argument(
        "--prompts",
        metavar="DIR",
        help="prompt templates for the request field 'prompt': one DIR/<id>/<version>.json per prompt version "
        "(without it, 'prompt' is a 400)",
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
    _add_sampling(serve)
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
        "--reasoning_summaries",
        choices=("model", "off"),
        default="model",
        help="reasoning.summary: summaries the model writes in a side generation (model, the default), "
        "or none (off: summary: [])",
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
        type=positive_int,
        default=64 << 10,
        help="longest tool output the model reads; longer is truncated with a note (default: 65536)",
    )
    builtin = serve.add_argument_group("gpt-oss's built-in tools, run by the server (README: isolation)")
    builtin.add_argument(
        "--python_tool",
        type=_python_tool,
        default="off",
        metavar="{off,local,mcp:URL}",
        help="run code_interpreter calls (gpt-oss's python): local = a bubblewrap sandbox per call, "
        "mcp:URL = the python tool of that MCP server (default: off, the tool is not shown)",
    )
    builtin.add_argument(
        "--python_timeout",
        type=_positive_float,
        default=30.0,
        help="wall-clock seconds of one local python call",
    )
    builtin.add_argument(
        "--python_memory_mb",
        type=positive_int,
        default=1024,
        help="memory of one local python call: all its processes (its cgroup) and each one's address space",
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
        help="hosts or CIDRs that are not globally reachable (private, loopback, link-local, shared, special-purpose) the browser may fetch anyway (default: none)",
    )
    trt = serve.add_argument_group("TensorRT-LLM (--engine trtllm), as in trtllm-serve")
    trt.add_argument(
        "--backend", choices=["pytorch", "tensorrt"], help="TensorRT-LLM backend (default: pytorch)"
    )
    trt.add_argument("--tokenizer", help="tokenizer path or name for TensorRT-LLM")
    trt.add_argument("--max_batch_size", type=positive_int, help="most requests scheduled at once")
    trt.add_argument("--max_num_tokens", type=positive_int, help="most batched tokens per step")
    trt.add_argument(
        "--max_seq_len",
        type=positive_int,
        help="most tokens of prompt plus output (default: from the model)",
    )
    trt.add_argument(
        "--tp_size", "--tensor_parallel_size", dest="tp_size", type=positive_int, help="tensor parallelism"
    )
    trt.add_argument(
        "--pp_size",
        "--pipeline_parallel_size",
        dest="pp_size",
        type=positive_int,
        help="pipeline parallelism",
    )
    trt.add_argument(
        "--ep_size",
        "--moe_expert_parallel_size",
        dest="ep_size",
        type=positive_int,
        help="expert parallelism",
    )
    trt.add_argument(
        "--kv_cache_free_gpu_memory_fraction",
        "--free_gpu_memory_fraction",
        dest="kv_cache_free_gpu_memory_fraction",
        type=_ranged(0.0, 1.0, low_open=True),
        help="free GPU memory fraction for the KV cache (default: 0.9)",
    )
    trt.add_argument(
        "--enable_chunked_prefill",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="prefill long prompts in max_num_tokens chunks, so any prompt the context window holds is served "
        "(default: on; --no-enable_chunked_prefill refuses prompts over max_num_tokens with 400)",
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
