"""The ``trtllm-responses`` command line.

trtllm-responses serve [MODEL] [flags]            serve the Responses API (echo executor without MODEL)
trtllm-responses render REQUEST.json [--tokens]   the Harmony prompt of a Responses request body
trtllm-responses parse COMPLETION.txt [--ids]     the Responses output items of a Harmony completion
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import signal
import socket
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core import APIError, VocabError
from .arg_types import positive_int
from .serve_options import add_serve_arguments, server_config

if TYPE_CHECKING:
    import uvicorn

    from ..executors import Executor
    from ..executors.trtllm import KvEventsSettings
    from ..harmony import HarmonyEncoding
    from ..server import ServerConfig
    from ..tools import ToolSettings
    from .frontends import FrontendGroup, FrontendRole
    from .launch import LaunchPlan

__all__ = ["build_parser", "main"]

logger = logging.getLogger("trtllm_responses")


def _read(path: str) -> str:
    return sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")


def cmd_render(args: argparse.Namespace) -> int:
    """Print the Harmony prompt (or its token ids) for a Responses request body."""
    from ..adapter import HarmonyAdapter
    from ..harmony import load_encoding
    from ..request import parse_request

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
    from ..harmony import completion_to_output_items, load_encoding, parse_completion

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
    "(see docs/echo-executor.md#the-echo-executor); pass MODEL with --engine trtllm to serve gpt-oss."
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
    "kv_host_cache_bytes",
    "kv_tool_pause_seconds",
    "trust_remote_code",
    "extra_llm_api_options",
    "enable_chunked_prefill",
    "kv_events_endpoint",
    "kv_events_replica_id",
)


def engine_of(args: argparse.Namespace) -> str:
    """``--engine``, or by default: ``trtllm-grpc`` with ``--engine_url``, ``trtllm`` with MODEL, else ``echo``."""
    return str(
        args.engine or ("trtllm-grpc" if _remote_engines(args) else "trtllm" if args.model else "echo")
    )


def _build_executor(args: argparse.Namespace, engine: str) -> tuple[Executor, HarmonyEncoding]:
    """The executor ``serve`` runs, and the encoding it uses; raises LaunchError before any GPU work."""
    from ..executors import EchoExecutor
    from ..harmony import load_encoding
    from .launch import LaunchError, resolve_launch

    given = [
        f"--{flag}"
        for flag in _TRTLLM_FLAGS
        if getattr(args, flag) is not None and getattr(args, flag) is not False
    ]
    if (_remote_engines(args) or args.grpc_protocol) and engine != "trtllm-grpc":
        raise LaunchError(
            "--engine_url, --engine_urls_file, --grpc_protocol and the --prefill_engine_url/--decode_engine_url "
            "flags and files only apply to --engine trtllm-grpc"
        )
    if engine == "trtllm-grpc":
        return _grpc_executor(args, given)
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
    from .world import check_world, read_world

    world = read_world(os.environ)  # read here, at start, never on the request path
    check_world(world, plan.llm_kwargs)
    if world.launcher:
        logger.info(
            "Under trtllm-llmapi-launch: this process (rank 0) serves HTTP for %d rank(s)", world.size
        )
    _check_release(args, plan)
    from ..executors.trtllm import DEFAULT_TOOL_PAUSE_SECONDS, TrtllmExecutor
    from .frontends import ENV_FRONTEND

    encoding = load_encoding(plan.bundle_dir)
    for key, source in sorted(plan.sources.items()):
        logger.info("LLM argument %s from %s", key, source)
    attached = (
        ENV_FRONTEND in os.environ
    )  # an attached frontend of a group: attaches to the launcher's engine
    try:
        executor = TrtllmExecutor(
            plan.llm_kwargs,
            end_id=encoding.return_,
            backend=plan.backend,
            frontends=args.num_serve_frontends,
            guided=args.guided_decoding,
            attached=attached,
            encoding=encoding,
            kv_events=_kv_events(args),
            tool_pause_seconds=DEFAULT_TOOL_PAUSE_SECONDS
            if args.kv_tool_pause_seconds is None
            else args.kv_tool_pause_seconds,
            # serve --otlp_traces_endpoint: also handed to the LLM, as trtllm-serve does (where the release takes it).
            otlp_traces_endpoint=getattr(args, "otlp_traces_endpoint", None),
        )
    except ValueError as exc:
        raise LaunchError(str(exc)) from exc
    return executor, encoding


def _grpc_executor(args: argparse.Namespace, given: list[str]) -> tuple[Executor, HarmonyEncoding]:
    """``--engine trtllm-grpc``: the executor of the pool of engines at ``--engine_url`` (repeated) and in
    ``--engine_urls_file``; LaunchError for what it cannot take (a MODEL, engine flags: those belong to the
    engines' own ``trtllm-serve``; no engine, a malformed URL, a file that does not read)."""
    from ..executors.trtllm_grpc.executor import TrtllmGrpcExecutor
    from ..harmony import load_encoding
    from .launch import LaunchError

    if given:
        raise LaunchError(
            f"{', '.join(given)} configure the engine: with --engine trtllm-grpc, pass them to the "
            "engine's own `trtllm-serve MODEL --grpc`"
        )
    if args.model:
        raise LaunchError(
            "--engine trtllm-grpc takes no MODEL: the engine at --engine_url has loaded it (name it here with "
            "--served_model_name)"
        )
    if args.echo_tokens_per_second:
        raise LaunchError("--echo_tokens_per_second only applies to --engine echo")
    if _disaggregated(args):
        return _disaggregated_executor(args)
    if not args.engine_url and not args.engine_urls_file:
        raise LaunchError(
            "--engine trtllm-grpc needs an engine: --engine_url grpc://HOST:PORT (repeatable), or --engine_urls_file"
        )
    encoding = load_encoding()
    try:
        executor = TrtllmGrpcExecutor(
            args.engine_url or [],
            urls_file=args.engine_urls_file,
            encoding=encoding,
            guided=args.guided_decoding,
            protocol=args.grpc_protocol or "smg",
        )
    except (OSError, ValueError) as exc:
        raise LaunchError(f"the engines cannot be served: {exc}") from exc
    return executor, encoding


def _remote_engines(args: argparse.Namespace) -> bool:
    """Whether engines reached over gRPC are given: for whole turns or disaggregated (a flag or a file)."""
    return bool(args.engine_url or args.engine_urls_file or _disaggregated(args))


def _disaggregated(args: argparse.Namespace) -> bool:
    """Whether a prefill or a decode engine is given (a flag or a file)."""
    sides = ("prefill_engine_url", "prefill_engine_urls_file", "decode_engine_url", "decode_engine_urls_file")
    return any(getattr(args, flag) for flag in sides)


def _disaggregated_executor(args: argparse.Namespace) -> tuple[Executor, HarmonyEncoding]:
    """``--prefill_engine_url`` / ``--decode_engine_url`` and their files: both sides, each from its repeated flag,
    its file or both, OpenEngine only, never with ``--engine_url`` or ``--engine_urls_file``
    (docs/a-fleet-of-engines.md#prefill-and-decode-on-different-engines)."""
    from ..executors.trtllm_grpc.executor import TrtllmGrpcExecutor
    from ..harmony import load_encoding
    from .launch import LaunchError

    prefill, decode = args.prefill_engine_url or [], args.decode_engine_url or []
    if args.engine_url or args.engine_urls_file:
        raise LaunchError(
            "--engine_url/--engine_urls_file with --prefill_engine_url/--decode_engine_url (or their files): give "
            "either engines for whole turns or the prefill and decode engines, not both"
        )
    for side, urls, path in (
        ("prefill", prefill, args.prefill_engine_urls_file),
        ("decode", decode, args.decode_engine_urls_file),
    ):
        if not urls and path is None:
            raise LaunchError(
                f"disaggregated serving needs --{side}_engine_url grpc://HOST:PORT (or --{side}_engine_urls_file) "
                "too: a turn's context and its generation run on different engines"
            )
    if args.grpc_protocol != "openengine":
        raise LaunchError(
            "--prefill_engine_url/--decode_engine_url need --grpc_protocol openengine (engines started with "
            "trtllm-serve --grpc --grpc-protocol openengine): SMG's protocol cannot hand a context over, its "
            "GenerateComplete returns none of the context phase's parameters (no request id, no opaque_state), "
            "so a decode engine could not find the context's KV cache"
        )
    encoding = load_encoding()
    try:
        executor = TrtllmGrpcExecutor(
            encoding=encoding,
            guided=args.guided_decoding,
            protocol="openengine",
            prefill_urls=prefill,
            decode_urls=decode,
            prefill_urls_file=args.prefill_engine_urls_file,
            decode_urls_file=args.decode_engine_urls_file,
        )
    except (OSError, ValueError) as exc:
        raise LaunchError(f"the engines cannot be served: {exc}") from exc
    return executor, encoding


def _kv_events(args: argparse.Namespace) -> KvEventsSettings | None:
    """Where the engine's KV cache events go (``--kv_events_endpoint``), and this replica's id; None: off."""
    from ..executors.trtllm import KvEventsSettings
    from .launch import LaunchError

    if args.kv_events_endpoint is None:
        if args.kv_events_replica_id is not None:
            raise LaunchError("--kv_events_replica_id needs --kv_events_endpoint")
        return None
    host = args.host if args.host not in ("", "0.0.0.0", "::") else socket.gethostname()
    return KvEventsSettings(args.kv_events_endpoint, args.kv_events_replica_id or f"{host}:{args.port}")


def _check_release(args: argparse.Namespace, plan: LaunchPlan) -> None:
    """Refuse (LaunchError), before any model loads, what the installed TensorRT-LLM cannot serve: it does
    not import, the sampling defaults it would not apply (unless ``--unsupported_sampling ignore``), the
    backend, LLM arguments or frontend count it does not take."""
    from ..executors.trtllm import (
        Release,
        TrtllmUnavailableError,
        check_backend,
        check_frontends,
        check_llm_arguments,
        import_tensorrt_llm,
    )
    from ..responses import check_defaults
    from .launch import LaunchError

    try:
        trtllm = import_tensorrt_llm()
    except TrtllmUnavailableError as exc:
        raise LaunchError(str(exc)) from exc
    version = str(getattr(trtllm, "__version__", ""))
    defaults = server_config(args).sampling
    unapplied = check_defaults(defaults, Release(version).unapplied_sampling)
    if (
        unapplied and defaults.unsupported == "refuse"
    ):  # before any model loads (the app checks again at start)
        raise LaunchError(
            "the sampling defaults cannot be applied: " + " ".join(unapplied) + " Drop the flag, or pass "
            "--unsupported_sampling ignore to serve without it."
        )
    try:
        check_backend(plan.backend, version)
        check_llm_arguments(plan.llm_kwargs, plan.backend)
        check_frontends(args.num_serve_frontends, plan.backend)
    except ValueError as exc:
        raise LaunchError(str(exc)) from exc


def cmd_serve(args: argparse.Namespace) -> int:
    """Start the server: alone, or as one frontend of a group (``--num_serve_frontends``, ``frontends.py``)."""
    from ..adapter import HarmonyAdapter
    from ..ops import uvicorn_logging
    from ..server import create_app, uvicorn_config
    from ..store import open_store

    engine = engine_of(args)
    config = server_config(args)
    group, sock, config, role = _frontend_group(config)
    _check_tracing(config.otlp_traces_endpoint)
    executor, encoding = _build_executor(args, engine)
    _check_builtin_tools(config.tools)
    store = open_store(
        config.store,
        max_responses=config.max_stored_responses,
        max_bytes=config.max_store_bytes,
        ttl=config.store_ttl,
    )
    app: Any = create_app(
        config, executor, store, HarmonyAdapter(encoding, render_cache_bytes=config.render_cache_bytes)
    )
    shutdown = app.state.shutdown
    _reload_on_sighup(app, executor, group)
    failed: list[tuple[int, int]] = []  # set by the launcher's watch: a frontend of the group exited
    app = _in_group(app, group, role, executor, config, failed)
    Server = _server_class(shutdown, group, role)
    uvicorn_settings = uvicorn_config(
        app,
        config.http,
        host=config.host,
        port=config.port,
        log_level=config.log_level,
        access_log=False,
        # WebSockets drain (in-flight responses end, then 1012) until the responses' own deadline has ended them.
        drain_timeout=config.shutdown_timeout + 5,
        # Connections close by themselves once running responses end (by --shutdown_timeout at most,
        # then a terminal event): uvicorn waits a little longer before cancelling anything.
        timeout_graceful_shutdown=int(config.shutdown_timeout) + 10,
        **uvicorn_logging(config.log_format),
    )
    server = Server(uvicorn_settings)
    try:
        server.run(sockets=_sockets(sock, config))
    finally:
        if group is not None:
            import shutil

            group.stop(grace=config.shutdown_timeout + 15)
            shutil.rmtree(group.group_dir, ignore_errors=True)  # the metrics files of the group's processes
    if failed or (group is not None and not server.started):
        return 1
    return 0


def _reload_on_sighup(app: Any, executor: Executor, group: FrontendGroup | None) -> None:
    """SIGHUP reads the tenants file (docs/tenants.md#the-tenants-file) and the executor's configuration
    (``Executor.reload``: the gRPC engines' file) again, in this frontend and, from the launcher, in every other
    of its group. Streams running keep the tenant and the engine they began with."""

    def reload(signum: int, frame: Any) -> None:
        app.tenants.reload()  # swaps one reference: safe between any two bytecodes of the loop
        executor.reload()  # schedules its work on the loop
        if group is not None:
            group.forward_signal(signal.SIGHUP)

    signal.signal(signal.SIGHUP, reload)


def _in_group(
    app: Any,
    group: FrontendGroup | None,
    role: FrontendRole,
    executor: Executor,
    config: ServerConfig,
    failed: list[tuple[int, int]],
) -> Any:
    """``app`` as this process serves it in its group: a launcher's starts the other frontends once it
    starts and records in ``failed`` one that exits (then ends the group: it lives and dies together); an
    attached frontend ends when its launcher does."""
    if group is not None:
        from .frontends import StartGroupWithApp, serve_argv

        def start_group() -> None:
            # TensorRT-LLM: each attached frontend attaches to this process's engine (attach_env); the
            # echo: each runs its own.
            group.start(serve_argv([*sys.argv[1:], "--port", str(config.port)]), executor.attach_env)

            def lost(pid: int, code: int) -> None:
                failed.append((pid, code))
                os.kill(os.getpid(), signal.SIGTERM)  # the group lives and dies together

            group.watch(lost)

        return StartGroupWithApp(app, start_group)
    if role.is_attached:
        from .frontends import watch_launcher

        watch_launcher(lambda: os.kill(os.getpid(), signal.SIGTERM))
    return app


def _server_class(shutdown: Any, group: FrontendGroup | None, role: FrontendRole) -> type[uvicorn.Server]:
    """uvicorn's Server, draining this process's responses (``shutdown``) and the group's frontends on
    exit, a graceful SIGTERM exiting 0, and an attached frontend telling its launcher it is ready."""
    import uvicorn

    class Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: Any) -> None:
            super().handle_exit(sig, frame)
            shutdown.begin()
            if group is not None:
                group.terminate()  # every frontend drains as this one does
            if sig == signal.SIGTERM and sig in self._captured_signals:
                # A graceful SIGTERM shutdown is a normal exit (0): uvicorn must not re-raise it.
                self._captured_signals.remove(sig)

        async def startup(self, sockets: list[Any] | None = None) -> None:
            await super().startup(sockets)
            if self.started and role.is_attached:
                from .frontends import signal_ready

                signal_ready()

    return Server


def _sockets(sock: Any, config: ServerConfig) -> list[Any] | None:
    """What a frontend of a group listens on: the shared port, and its own Unix socket in the group's folder
    (where the others gather ``/stats``); None for a server alone (uvicorn binds host:port)."""
    if sock is None:
        return None
    import socket

    from ..server import frontend_socket_path

    assert config.group_dir is not None
    path = frontend_socket_path(config.group_dir, config.frontend_index)
    local = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    local.bind(path)
    local.listen(64)
    return [sock, local]


def _frontend_group(config: ServerConfig) -> tuple[FrontendGroup | None, Any, ServerConfig, FrontendRole]:
    """Where this process stands in ``--num_serve_frontends``: the group it launches (None: it launches
    none), the port's shared socket, its configuration with the group's port and metrics folder, its role."""
    from .frontends import FrontendGroup, FrontendRole, frontend_role, reuse_port_socket
    from .launch import LaunchError

    role = frontend_role(os.environ, config.num_serve_frontends)
    if role.count == 1:
        return None, None, config, role
    if config.store == "memory":
        raise LaunchError(
            f"--num_serve_frontends {role.count} needs a store every frontend reaches: a response kept in one "
            "frontend's memory could not be continued, retrieved or deleted through another. Add "
            "--store sqlite:///PATH (one host) or --store redis://HOST:PORT/DB (one host or many)."
        )
    if role.is_launcher:
        import tempfile

        from ..responses import load_key

        role = FrontendRole(0, role.count, tempfile.mkdtemp(prefix="trtllm-responses-frontends-"))
        # One key for the group, made (if it must be) before any frontend reads it.
        load_key(config.encryption_key_file)
    assert role.group_dir is not None
    from ..ops import use_group_folder
    from ..server import group_metrics_dir

    use_group_folder(group_metrics_dir(role.group_dir))
    sock = reuse_port_socket(config.host, config.port)
    config = dataclasses.replace(
        config, port=sock.getsockname()[1], group_dir=role.group_dir, frontend_index=role.index
    )
    group = FrontendGroup(role.count, role.group_dir) if role.is_launcher else None
    return group, sock, config, role


def _check_tracing(endpoint: str | None) -> None:
    """Refuse (LaunchError), before any model loads, tracing asked for that cannot run; say where it goes."""
    from ..ops import tracing
    from .launch import LaunchError

    try:
        if tracing.check(endpoint):
            logger.info("OpenTelemetry tracing on (docs/tracing-and-dashboards.md).")
    except tracing.TracingSetupError as exc:
        raise LaunchError(str(exc)) from exc


def _check_builtin_tools(tools: ToolSettings) -> None:
    """Say what the operator turned on of gpt-oss's built-in tools; refuse python ``local`` without its sandbox."""
    if tools.python_tool == "local":
        from ..tools import SandboxUnavailable, setup_sandbox

        try:
            sandbox = setup_sandbox(tools.python_limits)
        except SandboxUnavailable as exc:
            raise SandboxUnavailable(f"--python_tool local needs its sandbox, and {exc}.") from None
        logger.warning("--python_tool local: model-written code runs here, in a %s.", sandbox.describe())
    elif tools.python_tool != "off":
        logger.info("--python_tool %s: code_interpreter calls go to that MCP server.", tools.python_tool)
    if tools.browser_backend != "off":
        logger.info("--browser_backend %s: web_search calls are run by the server.", tools.browser_backend)


class _Given(argparse.Action):
    """Stores the value and remembers that the flag was given (``args.<dest>_given``)."""

    def __call__(self, parser: Any, namespace: argparse.Namespace, values: Any, option: Any = None) -> None:
        setattr(namespace, self.dest, values)
        setattr(namespace, f"{self.dest}_given", True)


def cmd_build(args: argparse.Namespace) -> int:
    """Build a serving bundle from a checkpoint."""
    from .build import build_bundle

    if not getattr(args, "gpu_given", False):  # the default picks Blackwell's MoE kernels: say so
        print(
            f"trtllm-responses build: --gpu not given, building for {args.gpu} (its MoE backend); "
            "on Hopper (H100/H200) pass --gpu hopper.",
            file=sys.stderr,
            flush=True,
        )

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


def _add_serve(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    serve = sub.add_parser(
        "serve",
        help="serve the Responses API",
        description="Serve the Responses API. Flags follow trtllm-serve; LLM arguments merge as flags < bundle < "
        "--extra_llm_api_options file.",
    )
    add_serve_arguments(serve)
    serve.set_defaults(func=cmd_serve)


def _add_build(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    import inspect

    from .build import build_bundle

    # Each flag's default is build_bundle's own (tests/test_cli_defaults.py).
    d = {name: p.default for name, p in inspect.signature(build_bundle).parameters.items()}
    build = sub.add_parser("build", help="build a serving bundle engines/<name>/ from a gpt-oss checkpoint")
    build.add_argument("checkpoint", help="checkpoint folder (config.json, safetensors)")
    build.add_argument("--name", help="bundle name (default: the checkpoint folder's name)")
    build.add_argument(
        "--output_dir", default=d["output_dir"], help=f"where bundles go (default: {d['output_dir']}/)"
    )
    build.add_argument(
        "--profile", choices=["latency", "throughput"], default=d["profile"], help="(default: %(default)s)"
    )
    build.add_argument(
        "--gpu",
        choices=["hopper", "blackwell"],
        default=d["gpu"],
        action=_Given,
        help="the GPU generation the bundle is for: it picks the MoE kernels (hopper: H100/H200, TRITON; "
        "blackwell: B200/GB200, TRTLLM). (default: %(default)s; on Hopper pass --gpu hopper: a Blackwell "
        "bundle's MoE backend does not run there)",
    )
    build.add_argument(
        "--backend", choices=["pytorch", "tensorrt"], default=d["backend"], help="(default: %(default)s)"
    )
    build.add_argument("--max_seq_len", type=positive_int)
    build.add_argument("--max_batch_size", type=positive_int)
    build.add_argument("--max_num_tokens", type=positive_int)
    build.add_argument("--tp_size", type=positive_int, default=d["tp_size"], help="(default: %(default)s)")
    build.add_argument("--pp_size", type=positive_int, default=d["pp_size"], help="(default: %(default)s)")
    build.add_argument("--ep_size", type=positive_int)
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

    hash_key = sub.add_parser(
        "hash-key",
        help="print the sha256 digest a tenants file holds for the key read from stdin (docs/tenants.md#the-tenants-file)",
    )
    hash_key.set_defaults(func=cmd_hash_key)
    return parser


def cmd_hash_key(args: argparse.Namespace) -> int:
    """Print ``sha256:<hex>`` of the key on stdin (its first line, without the line's end): never an argument,
    so the key stays out of the shell's history and the process list."""
    from ..tenants import hash_key

    key = sys.stdin.readline().rstrip("\r\n")
    if not key:
        print("trtllm-responses hash-key: no key on stdin", file=sys.stderr)
        return 2
    print(hash_key(key))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``trtllm-responses`` console script."""
    from ..ops import setup_logging, tracing

    args = build_parser().parse_args(argv)
    level = getattr(args, "log_level", "info").upper()
    log_format = getattr(args, "log_format", "text")
    # JSON lines carry the current span's ids (docs/tracing-and-dashboards.md#json-logs): read per line, so
    # tracing configured later (in each process's lifespan) is seen.
    setup_logging("DEBUG" if level == "TRACE" else level, log_format, ids=tracing.current_ids)
    if level not in ("DEBUG", "TRACE"):
        # The MCP client logs every HTTP exchange and session id at INFO: noise, and session ids are
        # credentials of a kind. Their warnings and errors still show.
        for name in ("httpx2", "mcp"):
            logging.getLogger(name).setLevel(logging.WARNING)
    try:
        return int(args.func(args))
    except (APIError, VocabError, OSError, ValueError, RuntimeError) as exc:
        message = exc.message if isinstance(exc, APIError) else str(exc)
        if log_format == "json":  # a log pipeline reads this line too
            logger.error("trtllm-responses %s: %s", args.command, message)
        else:
            print(f"trtllm-responses {args.command}: {message}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
