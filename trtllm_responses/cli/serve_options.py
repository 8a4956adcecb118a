"""The flags of ``trtllm-responses serve``: their definitions, their checks, and the ServerConfig they make.

Each flag is checked as it is parsed (a bad value is argparse's usage error naming the flag),
so a server never starts on a value it would refuse later. A flag's default, and the help text
that states it, is read off the field it fills (ServerConfig, HTTPLimits, SamplingDefaults,
ToolSettings, PythonLimits), never written twice (``tests/test_cli_defaults.py``).
"""

from __future__ import annotations

import argparse
import math
import os
from pathlib import Path
from typing import TYPE_CHECKING

from .admission_options import add_admission, admission_limits
from .arg_types import non_negative_float, non_negative_int, positive_float, positive_int

if TYPE_CHECKING:
    from ..server import ServerConfig

__all__ = ["HTTP_LIMIT_FLAGS", "SAMPLING_FLAGS", "add_serve_arguments", "server_config"]

#: ``serve`` flags that are fields of SamplingDefaults (same names).
SAMPLING_FLAGS = ("temperature", "top_p", "top_k", "min_p", "frequency_penalty", "presence_penalty")


def _frontend_count(text: str) -> int:
    from ..server import MAX_SERVE_FRONTENDS

    count = positive_int(text)
    if count > MAX_SERVE_FRONTENDS:
        raise argparse.ArgumentTypeError(f"at most {MAX_SERVE_FRONTENDS} frontends, got {count}")
    return count


def server_config(args: argparse.Namespace) -> ServerConfig:
    """The server configuration ``serve``'s flags describe."""
    from ..responses import SamplingDefaults
    from ..server import HTTPLimits, ServerConfig
    from ..tools import PythonLimits, ToolSettings

    name = args.served_model_name or (
        Path(args.model).name if args.model else ServerConfig().served_model_name
    )
    return ServerConfig(
        host=args.host,
        port=args.port,
        served_model_name=name,
        model_aliases=tuple(args.model_alias) if args.model_alias else ServerConfig().model_aliases,
        max_stored_responses=args.max_stored_responses,
        max_store_bytes=args.max_store_bytes,
        log_level=args.log_level,
        otlp_traces_endpoint=args.otlp_traces_endpoint,
        log_format=args.log_format,
        store=args.store,
        store_ttl=args.store_ttl,
        api_key=args.api_key or os.environ.get("TRTLLM_RESPONSES_API_KEY") or None,
        tenants_file=args.tenants,
        shutdown_timeout=args.shutdown_timeout,
        encryption_key_file=args.encryption_key_file,
        redact_reasoning=args.redact_reasoning,
        reasoning_summaries=args.reasoning_summaries,
        websocket_max_seconds=args.websocket_max_seconds,
        max_input_bytes=args.max_input_bytes,
        render_workers=args.render_workers,
        num_serve_frontends=args.num_serve_frontends,
        render_cache_bytes=args.render_cache_bytes,
        replay_prefix_bytes=args.replay_prefix_bytes,
        prompts=args.prompts,
        http=HTTPLimits(**{name: getattr(args, name) for name in HTTP_LIMIT_FLAGS}),
        admission=admission_limits(args),
        sampling=SamplingDefaults(
            **{name: getattr(args, name) for name in SAMPLING_FLAGS}, unsupported=args.unsupported_sampling
        ),
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
                concurrent_calls=args.python_concurrent_calls,
                output_bytes=args.tool_output_max_bytes,
            ),
            browser_backend=args.browser_backend,
            browser_offline_backend=args.browser_offline_backend,
            fetch_allow_private=tuple(args.fetch_allow_private),
        ),
    )


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


def _offline_backend(text: str) -> str:
    kind, _, url = text.partition(":")
    if text == "off" or (kind == "searxng" and _is_http_url(url)):
        return text
    raise argparse.ArgumentTypeError(f"expected off or searxng:URL, got {text}")


def _is_http_url(text: str) -> bool:
    from urllib.parse import urlsplit

    parts = urlsplit(text)
    return parts.scheme in ("http", "https") and bool(parts.hostname)


def _hosts_or_cidrs(text: str) -> list[str]:
    from ..tools import parse_allow_private

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
    from ..server import HTTPLimits

    d = HTTPLimits()
    group = serve.add_argument_group("HTTP limits (per connection; see docs/limits.md#http-limits)")
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
        type=positive_float,
        default=d.timeout_request_head,
        help=f"seconds to receive a request head, from connecting or its first byte; then 408 "
        f"(default: {d.timeout_request_head:g})",
    )
    group.add_argument(
        "--timeout_request_body",
        type=positive_float,
        default=d.timeout_request_body,
        help=f"seconds to receive a request body after its head; then 408 (default: {d.timeout_request_body:g})",
    )
    group.add_argument(
        "--timeout_keep_alive",
        type=positive_float,
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
        type=non_negative_int,
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
    from ..responses import SamplingDefaults

    d = SamplingDefaults()
    group = serve.add_argument_group(
        "sampling defaults (a request's own fields win; docs/serve.md#trtllm-responses-serve)"
    )
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
    for name, check in (
        ("top_k", non_negative_int),
        ("min_p", _ranged(0.0, 1.0)),
        ("frequency_penalty", _ranged(-2.0, 2.0)),
        ("presence_penalty", _ranged(-2.0, 2.0)),
    ):
        default = getattr(d, name)
        group.add_argument(
            f"--{name}",
            type=check,
            default=default,
            help=f"{name} of requests that set none (default: {'unset' if default is None else f'{default:g}'})",
        )
    group.add_argument(
        "--unsupported_sampling",
        choices=["refuse", "ignore"],
        default=d.unsupported,
        help="a request setting seed, min_p or a penalty the engine does not apply (TensorRT-LLM before 1.3.0rc29): "
        "refuse it with 400, or drop the setting (the response echoes what was used) (default: %(default)s)",
    )


def _echo_pace() -> float:
    """The echo executor's own pace (``tokens_per_second``), the default of ``--echo_tokens_per_second``."""
    import inspect

    from ..executors import EchoExecutor

    return float(inspect.signature(EchoExecutor).parameters["tokens_per_second"].default)


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
    """Every flag of ``trtllm-responses serve``, grouped by concern, each checked as it is parsed, each
    default its field's."""
    serve.add_argument(
        "model", nargs="?", help="Hugging Face id, checkpoint folder or bundle folder (none: echo)"
    )
    for add_group in (
        _add_engine,
        _add_server,
        _add_store,
        _add_input,
        _add_reasoning,
        _add_http_limits,
        add_admission,
        _add_sampling,
        _add_mcp_tools,
        _add_builtin_tools,
        _add_trtllm,
    ):
        add_group(serve)


def _add_engine(serve: argparse.ArgumentParser) -> None:
    group = serve.add_argument_group("engine (what generates the tokens)")
    group.add_argument(
        "--engine",
        choices=["trtllm", "trtllm-grpc", "echo"],
        help="executor (default: trtllm-grpc with --engine_url, trtllm with MODEL, else echo)",
    )
    group.add_argument(
        "--engine_url",
        action="append",
        metavar="grpc://HOST:PORT",
        help="--engine trtllm-grpc: a TensorRT-LLM gRPC engine (trtllm-serve MODEL --grpc) to generate on; repeat "
        "it for a pool of engines, placed by session (docs/a-fleet-of-engines.md#a-pool-of-engines)",
    )
    group.add_argument(
        "--engine_urls_file",
        metavar="PATH",
        help="--engine trtllm-grpc: a file of more engine URLs, one a line (# comments), read again on SIGHUP: "
        "engines added take new sessions, engines removed drain (docs/a-fleet-of-engines.md#a-pool-of-engines)",
    )
    for side, what in (("prefill", "each turn's context (context_only)"), ("decode", "its generation")):
        group.add_argument(
            f"--{side}_engine_url",
            action="append",
            metavar="grpc://HOST:PORT",
            help=f"--engine trtllm-grpc --grpc_protocol openengine, disaggregated: a {side} engine, which runs "
            f"{what}; repeatable (a pool, placed by session); with --{'decode' if side == 'prefill' else 'prefill'}"
            "_engine_url, not with --engine_url (docs/a-fleet-of-engines.md#prefill-and-decode-on-different-engines)",
        )
        group.add_argument(
            f"--{side}_engine_urls_file",
            metavar="PATH",
            help=f"disaggregated: a file of more {side} engine URLs, one a line (# comments), read again on SIGHUP "
            "as --engine_urls_file is (docs/a-fleet-of-engines.md#prefill-and-decode-on-different-engines)",
        )
    group.add_argument(
        "--grpc_protocol",
        choices=["smg", "openengine"],
        help="--engine trtllm-grpc: the wire every engine speaks, as its trtllm-serve --grpc-protocol: smg "
        "(default) or openengine (TensorRT-LLM 1.3.0rc28 on; docs/a-fleet-of-engines.md#openengine-one-engine-or-a-pool)",
    )
    group.add_argument(
        "--echo_tokens_per_second",
        type=non_negative_float,
        default=_echo_pace(),
        help=f"pace the echo executor, tokens a second; 0: unpaced (default: {_echo_pace():g})",
    )


def _add_server(serve: argparse.ArgumentParser) -> None:
    from ..ops import LOG_FORMATS
    from ..server import MAX_SERVE_FRONTENDS, ServerConfig

    d = ServerConfig()
    group = serve.add_argument_group("server (address, names, access, processes, shutdown)")
    group.add_argument("--host", default=d.host, help=f"address to bind (default: {d.host})")
    group.add_argument("--port", type=int, default=d.port, help=f"port to bind (default: {d.port})")
    group.add_argument(
        "--served_model_name",
        help=f"model name in responses and /v1/models (default: MODEL's folder name, else {d.served_model_name})",
    )
    group.add_argument(
        "--model_alias",
        action="append",
        metavar="PATTERN",
        help="a model name (glob pattern) /v1/messages serves as the served model; repeatable (default: '*', any "
        "name, so Claude Code's claude-… names work); names matching none are a 404 (docs/anthropic-messages.md#anthropic-messages)",
    )
    group.add_argument(
        "--api_key",
        help="require 'Authorization: Bearer KEY' on /v1/* (also TRTLLM_RESPONSES_API_KEY)",
    )
    group.add_argument(
        "--tenants",
        metavar="FILE",
        help="a tenants file (JSON, or TOML ending .toml): keys as sha256 digests, limits, weights; reloaded on "
        "SIGHUP by every frontend (docs/tenants.md#the-tenants-file); exclusive with --api_key",
    )
    group.add_argument(
        "--log_level",
        default=d.log_level,
        choices=["critical", "error", "warning", "info", "debug", "trace"],
        help=f"how much the server logs (default: {d.log_level})",
    )
    group.add_argument(
        "--otlp_traces_endpoint",
        help="send OpenTelemetry traces here (as trtllm-serve's flag: OTLP over gRPC unless "
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/protobuf; handed to the engine too); the OTEL_* environment "
        "alone also turns tracing on (docs/tracing-and-dashboards.md; default: off)",
    )
    group.add_argument(
        "--log_format",
        default=d.log_format,
        choices=list(LOG_FORMATS),
        help="text: 'LEVEL logger: message' lines; json: every log line one JSON object on stderr, the access "
        "line's fields and the current trace and span ids included "
        f"(docs/tracing-and-dashboards.md#json-logs) (default: {d.log_format})",
    )
    group.add_argument(
        "--num_serve_frontends",
        type=_frontend_count,
        default=d.num_serve_frontends,
        help=f"serving frontend processes sharing the port (SO_REUSEPORT) and the engine, at most "
        f"{MAX_SERVE_FRONTENDS}; more than 1 needs --store sqlite:///PATH or redis://... "
        f"(default: {d.num_serve_frontends})",
    )
    group.add_argument(
        "--shutdown_timeout",
        type=non_negative_float,
        default=d.shutdown_timeout,
        help=f"on SIGTERM, seconds running responses get to finish before they are ended "
        f"(default: {d.shutdown_timeout:g})",
    )
    group.add_argument(
        "--websocket_max_seconds",
        type=positive_float,
        default=d.websocket_max_seconds,
        help=f"close WebSocket connections after this long (default: {d.websocket_max_seconds:g})",
    )


def _add_store(serve: argparse.ArgumentParser) -> None:
    from ..server import ServerConfig

    d = ServerConfig()
    group = serve.add_argument_group("store (where responses are kept, and how many)")
    group.add_argument(
        "--store",
        default=d.store,
        help=f"where responses are stored: memory, sqlite:///PATH (durable), redis://HOST:PORT/DB "
        f"(shared by replicas) (default: {d.store})",
    )
    group.add_argument(
        "--store_ttl",
        type=int,
        default=d.store_ttl,
        help=f"Redis store: seconds an entry lives after its last use; 0: until Redis evicts it "
        f"(default: {d.store_ttl})",
    )
    group.add_argument(
        "--max_stored_responses",
        type=positive_int,
        default=d.max_stored_responses,
        help=f"LRU bound on stored responses (default: {d.max_stored_responses})",
    )
    group.add_argument(
        "--max_store_bytes",
        type=positive_int,
        default=d.max_store_bytes,
        help=f"LRU bound on stored bytes (default: {d.max_store_bytes})",
    )


def _add_input(serve: argparse.ArgumentParser) -> None:
    from ..server import ServerConfig

    d = ServerConfig()
    group = serve.add_argument_group("request input (its size, where it is rendered, what is kept, prompts)")
    group.add_argument(
        "--max_input_bytes",
        type=non_negative_int,
        default=d.max_input_bytes,
        help=f"refuse larger request bodies before tokenizing them (400 context_length_exceeded); "
        f"0: 16 bytes per token of the context window (default: {d.max_input_bytes})",
    )
    group.add_argument(
        "--render_workers",
        type=non_negative_int,
        default=d.render_workers,
        help=f"worker processes rendering large inputs off the event loop, ~130 MiB each; "
        f"0: one a core, at most 4 (default: {d.render_workers})",
    )
    group.add_argument(
        "--render_cache_bytes",
        type=non_negative_int,
        default=d.render_cache_bytes,
        help=f"bytes of rendered input items kept, so a replayed history renders only its new items; "
        f"0: off (default: {d.render_cache_bytes})",
    )
    group.add_argument(
        "--replay_prefix_bytes",
        type=non_negative_int,
        default=d.replay_prefix_bytes,
        help=f"bytes of large request bodies' prefixes kept, so a replayed history parses only its new bytes; "
        f"0: off (default: {d.replay_prefix_bytes})",
    )
    group.add_argument(
        "--prompts",
        metavar="DIR",
        help="prompt templates for the request field 'prompt': one DIR/<id>/<version>.json per prompt version "
        "(without it, 'prompt' is a 400)",
    )


def _add_reasoning(serve: argparse.ArgumentParser) -> None:
    from ..server import ServerConfig

    d = ServerConfig()
    group = serve.add_argument_group("reasoning (encrypted items, redaction, summaries)")
    group.add_argument(
        "--encryption_key_file",
        help="base64 32-byte key for encrypted reasoning/compaction (default: "
        "$TRTLLM_RESPONSES_ENCRYPTION_KEY, else one generated once in the cache folder)",
    )
    group.add_argument(
        "--redact_reasoning",
        action="store_true",
        help="reasoning items carry only encrypted_content; reasoning text is not streamed",
    )
    group.add_argument(
        "--reasoning_summaries",
        choices=("model", "off"),
        default=d.reasoning_summaries,
        help=f"reasoning.summary: summaries the model writes in a side generation (model), or none "
        f"(off: summary: []) (default: {d.reasoning_summaries})",
    )


def _add_mcp_tools(serve: argparse.ArgumentParser) -> None:
    from ..tools import ToolSettings

    tool = ToolSettings()
    tools = serve.add_argument_group("server-run tools (MCP servers)")
    tools.add_argument(
        "--mcp_allowed_urls",
        type=_url_prefixes,
        default=list(tool.mcp_allowed_urls),
        metavar="PREFIX,...",
        help="URL prefixes a client's mcp tool may point the server at (default: none; mcp tools are refused)",
    )
    tools.add_argument(
        "--tool_server",
        type=_tool_server,
        action="append",
        default=list(tool.tool_servers),
        metavar="LABEL=URL",
        help="an operator-configured MCP server, used for {type: mcp, server_label: LABEL} (repeatable)",
    )
    tools.add_argument(
        "--tool_timeout",
        type=positive_float,
        default=tool.tool_timeout,
        help=f"seconds a tool call or listing may take (default: {tool.tool_timeout:g})",
    )
    tools.add_argument(
        "--tool_output_max_bytes",
        type=positive_int,
        default=tool.tool_output_max_bytes,
        help=f"longest tool output the model reads; longer is truncated with a note "
        f"(default: {tool.tool_output_max_bytes})",
    )


def _add_builtin_tools(serve: argparse.ArgumentParser) -> None:
    from ..tools import PythonLimits, ToolSettings

    tool, python = ToolSettings(), PythonLimits()
    builtin = serve.add_argument_group(
        "gpt-oss's built-in tools, run by the server (docs/server-run-tools.md#gpt-osss-own-tools-python-code_interpreter-and-browser-web_search: isolation)"
    )
    builtin.add_argument(
        "--python_tool",
        type=_python_tool,
        default=tool.python_tool,
        metavar="{off,local,mcp:URL}",
        help=f"run code_interpreter calls (gpt-oss's python): local = a bubblewrap sandbox per call, "
        f"mcp:URL = the python tool of that MCP server; off: the tool is not shown (default: {tool.python_tool})",
    )
    builtin.add_argument(
        "--python_timeout",
        type=positive_float,
        default=python.timeout,
        help=f"wall-clock seconds of one local python call (default: {python.timeout:g})",
    )
    builtin.add_argument(
        "--python_memory_mb",
        type=positive_int,
        default=python.memory_bytes >> 20,
        help=f"memory of one local python call: all its processes (its cgroup) and each one's address space "
        f"(default: {python.memory_bytes >> 20})",
    )
    builtin.add_argument(
        "--python_concurrent_calls",
        type=positive_int,
        default=python.concurrent_calls,
        help=f"local python calls running at once (more wait for a slot): every call's memory together is at "
        f"most this x --python_memory_mb (default: {python.concurrent_calls})",
    )
    builtin.add_argument(
        "--browser_backend",
        type=_browser_backend,
        default=tool.browser_backend,
        metavar="{off,exa,youcom,searxng:URL,mcp:URL}",
        help=f"run web_search calls (gpt-oss's browser) through this search backend; keys from EXA_API_KEY / "
        f"YDC_API_KEY; off: the tool is not shown (default: {tool.browser_backend})",
    )
    builtin.add_argument(
        "--browser_offline_backend",
        type=_offline_backend,
        default=tool.browser_offline_backend,
        metavar="{off,searxng:URL}",
        help="the search backend of web_search tools with external_web_access: false (a SearXNG over an index you "
        "vouch is offline or cached); off: such searches are refused, and nothing reaches the web "
        f"(default: {tool.browser_offline_backend})",
    )
    builtin.add_argument(
        "--fetch_allow_private",
        type=_hosts_or_cidrs,
        default=list(tool.fetch_allow_private),
        metavar="HOST_OR_CIDR,...",
        help="hosts or CIDRs that are not globally reachable (private, loopback, link-local, shared, special-purpose) the browser may fetch anyway (default: none)",
    )


def _add_trtllm(serve: argparse.ArgumentParser) -> None:
    from .launch import DEFAULT_FREE_GPU_MEMORY_FRACTION

    trt = serve.add_argument_group("TensorRT-LLM (--engine trtllm), as in trtllm-serve")
    trt.add_argument(
        "--backend", choices=["pytorch", "tensorrt"], help="TensorRT-LLM backend (default: pytorch)"
    )
    trt.add_argument(
        "--guided_decoding",
        choices=["on", "off"],
        default="on",
        help="build the LLM with xgrammar guided decoding (structured outputs, required tool calls, custom-tool "
        "grammars); off: without it, constrained requests refused with 400 (default: %(default)s)",
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
        help=f"free GPU memory fraction for the KV cache (default: {DEFAULT_FREE_GPU_MEMORY_FRACTION:g})",
    )
    trt.add_argument(
        "--kv_host_cache_bytes",
        dest="kv_host_cache_bytes",
        type=non_negative_int,
        help="host memory for KV-cache blocks evicted from the GPU (kv_cache_config.host_cache_size; blocks at "
        "normal priority and above are offloaded there and onboarded when reused; default: 0, none; sizing: "
        "docs/sessions-and-kv-cache.md#host-offload)",
    )
    trt.add_argument(
        "--kv_tool_pause_seconds",
        dest="kv_tool_pause_seconds",
        type=non_negative_int,
        help="keep the KV cache of a session turn that may end in a client tool call at a raised retention "
        "priority (60) this long, for the tool's output to come back (default: 120; 0: not raised)",
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
        "--kv_events_endpoint",
        help="publish the engine's KV cache events on this ZMQ endpoint (tcp://*:5557), in the wire format "
        "Dynamo's KV router reads (docs/sessions-and-kv-cache.md#kv-events-and-metrics; default: off)",
    )
    trt.add_argument(
        "--kv_events_replica_id",
        help="this replica's id in its KV events (the topic of every message; default: HOST:PORT, the host "
        "name where --host is a wildcard)",
    )
    trt.add_argument(
        "--extra_llm_api_options",
        "--config",
        dest="extra_llm_api_options",
        help="YAML of LLM arguments (wins over all)",
    )
