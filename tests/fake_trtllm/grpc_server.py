"""The fake TensorRT-LLM gRPC engine server as a process: ``trtllm-serve MODEL --grpc``, faked.

    python tests/fake_trtllm/grpc_server.py [MODEL] --port N [--host H] [--release X]
        [--extra_llm_api_options FILE] [--served_model_name NAME] [--grpc-protocol {smg,openengine}]

The fake ``tensorrt_llm`` beside this file plays release ``--release`` (default 1.4.0rc1; ``FAKE_TRTLLM_VERSION``
is set from it) and serves ``trtllm.TrtllmService`` with ``tensorrt_llm/grpc/smg/server.py``'s ``launch_server``,
as ``trtllm-serve``'s ``--grpc`` does (``tensorrt_llm/commands/serve.py``: the LLM's arguments, the flags and
the YAML of ``--extra_llm_api_options`` over them). A release without a gRPC server refuses as its
``trtllm-serve`` would: 1.1 and 1.2.x have no ``--grpc`` option (click: "Error: No such option: --grpc", exit
2); the 1.3.0 release candidates before the one the fake plays first (``_release.has_grpc_server``) are refused
likewise. Ready when stdout says "Server is ready to accept requests". The fake's own environment
(``FAKE_TRTLLM_STEP_DELAY``, ``FAKE_TRTLLM_NOISE``, ``FAKE_TRTLLM_LOG``) applies.

``--grpc-protocol openengine`` (default ``smg``, as ``trtllm-serve``'s, PR NVIDIA/TensorRT-LLM#17084) serves
OpenEngine's ``openengine.v1.Inference`` and ``Control`` instead (``tensorrt_llm/grpc/openengine/server.py``);
a release before the first whose OpenEngine server answers ``Generate`` (``_release.has_openengine_generate``:
1.3.0rc28) is refused, with exit 2.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent

#: The release a fake engine plays unless told: the newest the fake knows.
DEFAULT_RELEASE = "1.4.0rc1"


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("model", nargs="?", default="/ckpt/gpt-oss-tiny")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--release", default=os.environ.get("FAKE_TRTLLM_VERSION", DEFAULT_RELEASE))
    parser.add_argument("--extra_llm_api_options", type=Path, default=None)
    parser.add_argument("--served_model_name", default=None)
    parser.add_argument("--grpc-protocol", dest="grpc_protocol", choices=("smg", "openengine"), default="smg")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = _arguments(argv)
    os.environ["FAKE_TRTLLM_VERSION"] = args.release
    for path in (
        str(ROOT),
        str(HERE),
    ):  # trtllm_responses (the fake model, the stubs), then the fake tensorrt_llm
        if path not in sys.path:
            sys.path.insert(0, path)
    import tensorrt_llm
    from tensorrt_llm._release import has_grpc_server

    tensorrt_llm.__version__ = (
        args.release
    )  # what the fake reads the release from (already imported in a test)

    if not has_grpc_server():
        sys.stderr.write(
            f"Error: No such option: --grpc (TensorRT-LLM {args.release} as the fake plays it)\n"
        )
        return 2
    if args.grpc_protocol == "openengine":
        from tensorrt_llm._release import has_openengine_generate

        if not has_openengine_generate():
            sys.stderr.write(
                f"Error: TensorRT-LLM {args.release} as the fake plays it has no OpenEngine Generate "
                "(1.3.0rc28 on)\n"
            )
            return 2
    import yaml

    llm_args = {"model": args.model, "backend": "pytorch"}
    if args.extra_llm_api_options is not None:
        llm_args.update(yaml.safe_load(args.extra_llm_api_options.read_text()) or {})
    logging.basicConfig(stream=sys.stdout, level=logging.INFO, format="[TRT-LLM] %(message)s", force=True)
    if args.grpc_protocol == "openengine":
        from tensorrt_llm.grpc.openengine.server import launch_server
    else:
        from tensorrt_llm.grpc.smg.server import launch_server

    launch_server(args.host, args.port, llm_args, args.served_model_name)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
