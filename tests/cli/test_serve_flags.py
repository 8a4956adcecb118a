"""``trtllm-responses serve``'s flags: every one listed by the same names, each in a group by its concern.

Their defaults and the defaults their help texts state are ``test_cli_defaults.py``'s; here, that grouping
the flags (``cli/serve_options.py``: one function a group) lost none and renamed none.
"""

from __future__ import annotations

import argparse
import contextlib
import io

from trtllm_responses.cli.command import build_parser

#: Every option string of ``serve`` (aliases too), as they were before the flags were grouped.
SERVE_FLAGS = frozenset(
    """
    --engine --engine_url --engine_urls_file --prefill_engine_url --prefill_engine_urls_file --decode_engine_url
    --decode_engine_urls_file --grpc_protocol --echo_tokens_per_second
    --host --port --served_model_name --model_alias --api_key --tenants --log_level --log_format --num_serve_frontends
    --shutdown_timeout --websocket_max_seconds
    --store --store_ttl --max_stored_responses --max_store_bytes
    --max_input_bytes --render_workers --render_cache_bytes --replay_prefix_bytes --prompts
    --encryption_key_file --redact_reasoning --reasoning_summaries
    --max_head_bytes --max_header_count --timeout_request_head --timeout_request_body --timeout_keep_alive
    --limit_concurrency --max_connections_per_client
    --max_running_responses --max_waiting_responses --max_wait_seconds --rate_window_seconds
    --temperature --top_p --top_k --min_p --frequency_penalty --presence_penalty --unsupported_sampling
    --mcp_allowed_urls --tool_server --tool_timeout --tool_output_max_bytes
    --python_tool --python_timeout --python_memory_mb --python_concurrent_calls --browser_backend
    --browser_offline_backend --fetch_allow_private
    --backend --guided_decoding --tokenizer --max_batch_size --max_num_tokens --max_seq_len
    --tp_size --tensor_parallel_size --pp_size --pipeline_parallel_size --ep_size --moe_expert_parallel_size
    --kv_cache_free_gpu_memory_fraction --free_gpu_memory_fraction --kv_host_cache_bytes --kv_tool_pause_seconds
    --enable_chunked_prefill --no-enable_chunked_prefill --trust_remote_code --extra_llm_api_options --config
    --kv_events_endpoint --kv_events_replica_id --otlp_traces_endpoint
    """.split()
)


def _serve() -> argparse.ArgumentParser:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices["serve"]


def test_serve_has_every_flag_by_the_same_names() -> None:
    serve = _serve()
    options = {o for a in serve._actions for o in a.option_strings if a.dest != "help"}
    assert options == SERVE_FLAGS
    assert len({a.dest for a in serve._actions if a.option_strings and a.dest != "help"}) == 79  # and MODEL


def test_serve_help_lists_every_flag() -> None:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
        _serve().parse_args(["--help"])
    listed = set(out.getvalue().replace(",", " ").replace("[", " ").replace("]", " ").split())
    assert SERVE_FLAGS <= listed, SERVE_FLAGS - listed


def test_every_serve_flag_is_in_a_group_by_its_concern() -> None:
    serve = _serve()
    ungrouped = [
        a.option_strings[0]
        for group in serve._action_groups
        if group.title in ("options", "optional arguments")  # argparse's own group (its name before 3.10)
        for a in group._group_actions
        if a.dest != "help"
    ]
    assert ungrouped == []
    titled = [g for g in serve._action_groups if g.title not in ("options", "optional arguments")]
    assert len(titled) >= 10  # positional arguments, and one group a concern
