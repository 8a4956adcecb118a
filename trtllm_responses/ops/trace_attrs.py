"""The names spans are given and attributed with: OpenTelemetry's semantic conventions, then this server's.

Conventions as ``opentelemetry-semantic-conventions`` 0.66b2 spells them (``_incubating/attributes/``
``gen_ai_attributes.py``, ``mcp_attributes.py``, ``session_attributes.py``, ``http_attributes.py``,
``error_attributes.py``), written out here so that tracing off imports nothing of OpenTelemetry. A GenAI
inference span is named ``"{gen_ai.operation.name} {gen_ai.request.model}"`` (the GenAI spans' naming
rule); a tool's ``"execute_tool {gen_ai.tool.name}"``; an MCP request's ``"{mcp.method.name} {target}"``.

Never text: the ``*_CONTENT`` names below are set only when ``tracing.capture_content()``
(docs/tracing-and-dashboards.md).
"""

from __future__ import annotations

from typing import Final

# GenAI (gen_ai_attributes.py)
OPERATION: Final = "gen_ai.operation.name"  # "chat" (an inference), "execute_tool", "invoke_agent"
PROVIDER: Final = "gen_ai.provider.name"
REQUEST_MODEL: Final = "gen_ai.request.model"
REQUEST_MAX_TOKENS: Final = "gen_ai.request.max_tokens"
REQUEST_TEMPERATURE: Final = "gen_ai.request.temperature"
REQUEST_TOP_P: Final = "gen_ai.request.top_p"
REQUEST_SEED: Final = "gen_ai.request.seed"
REQUEST_STREAM: Final = "gen_ai.request.stream"
REQUEST_CHOICES: Final = "gen_ai.request.choice.count"
RESPONSE_ID: Final = "gen_ai.response.id"
RESPONSE_MODEL: Final = "gen_ai.response.model"
FINISH_REASONS: Final = "gen_ai.response.finish_reasons"
TIME_TO_FIRST_CHUNK: Final = "gen_ai.response.time_to_first_chunk"
INPUT_TOKENS: Final = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS: Final = "gen_ai.usage.output_tokens"
CACHED_TOKENS: Final = "gen_ai.usage.cache_read.input_tokens"
REASONING_TOKENS: Final = "gen_ai.usage.reasoning.output_tokens"
CONVERSATION_ID: Final = "gen_ai.conversation.id"
AGENT_ID: Final = "gen_ai.agent.id"
AGENT_NAME: Final = "gen_ai.agent.name"
TOOL_NAME: Final = "gen_ai.tool.name"
TOOL_TYPE: Final = "gen_ai.tool.type"  # "function", "extension" (server-run), "datastore"
TOOL_CALL_ID: Final = "gen_ai.tool.call.id"
# Text: only with capture_content().
INPUT_MESSAGES_CONTENT: Final = "gen_ai.input.messages"
OUTPUT_MESSAGES_CONTENT: Final = "gen_ai.output.messages"
SYSTEM_INSTRUCTIONS_CONTENT: Final = "gen_ai.system_instructions"
TOOL_ARGUMENTS_CONTENT: Final = "gen_ai.tool.call.arguments"
TOOL_RESULT_CONTENT: Final = "gen_ai.tool.call.result"

# MCP (mcp_attributes.py), session (session_attributes.py)
MCP_METHOD: Final = "mcp.method.name"
MCP_SESSION_ID: Final = "mcp.session.id"
MCP_PROTOCOL_VERSION: Final = "mcp.protocol.version"
SESSION_ID: Final = "session.id"  # the response's session key (docs/sessions-and-kv-cache.md#identity)
SESSION_PREVIOUS_ID: Final = "session.previous_id"  # a sub-agent's parent session

# HTTP, errors (http_attributes.py, url_attributes.py, error_attributes.py)
HTTP_METHOD: Final = "http.request.method"
HTTP_ROUTE: Final = "http.route"
HTTP_STATUS: Final = "http.response.status_code"
URL_PATH: Final = "url.path"
ERROR_TYPE: Final = "error.type"
SERVER_ADDRESS: Final = "server.address"  # server_attributes.py: an MCP server's host
SERVER_PORT: Final = "server.port"
RPC_STATUS: Final = "rpc.response.status_code"  # rpc_attributes.py: a JSON-RPC error answer's code

# This server's own (no convention covers them)
PROVIDER_NAME: Final = "trtllm-responses"  # the value of gen_ai.provider.name
TENANT: Final = "trtllm.tenant"  # the tenant's name (docs/tenants.md), never its key
REQUEST_ID: Final = "trtllm.request_id"  # x-request-id
TRANSPORT: Final = "trtllm.transport"  # "sse", "json", "websocket"
API: Final = "trtllm.api"  # "responses", "chat.completions", "messages"
STAGE: Final = "trtllm.stage"  # a prepare stage's name
BYTES: Final = "trtllm.bytes"  # a body's size
CACHE_HIT: Final = "trtllm.cache_hit"  # a rendering or history found again
BACKGROUND: Final = "trtllm.background"
STORE_BACKEND: Final = "trtllm.store.backend"
QUEUE_WAIT_S: Final = "trtllm.queue.wait_seconds"
# Request-level spans' own (docs/tracing-and-dashboards.md#spans)
RESPONSE_STATUS: Final = "trtllm.response.status"  # the terminal response's status
EXECUTOR_REQUEST_ID: Final = "trtllm.executor.request_id"  # the executor request a chat span generated
CHAIN_SOURCE: Final = "trtllm.chain.source"  # where previous_response_id was found: connection, cache, store
RENDER_WORKER: Final = "trtllm.render.worker"  # the new messages were rendered in the render worker
RENDER_MESSAGES: Final = "trtllm.render.messages"  # messages rendered now (cache misses)
RENDER_CACHED: Final = "trtllm.render.cached_messages"  # input messages found rendered in the item cache
PROMPT_TOKENS: Final = "trtllm.prompt.tokens"
ITEMS: Final = "trtllm.items"  # items read or written (a conversation's)
TRUNCATED: Final = "trtllm.truncated_messages"  # messages truncation "auto" left out
QUEUE_OUTCOME: Final = "trtllm.queue.outcome"  # admitted, waiting, timeout, refused, cancelled
# Tool-side spans' own (docs/tracing-and-dashboards.md#tool-spans)
MCP_SERVER_LABEL: Final = "trtllm.mcp.server_label"  # an MCP tool's server_label (its namespace)
TOOL_OUTPUT_BYTES: Final = "trtllm.tool.output_bytes"  # the UTF-8 size of what a tool call's model reads
SIDE_INPUT_TOKENS: Final = "trtllm.side_generation.input_tokens"  # a compaction's or summary's prompt
SIDE_OUTPUT_TOKENS: Final = "trtllm.side_generation.output_tokens"  # ... and what it generated
SUMMARY_MODE: Final = "trtllm.summary.mode"  # reasoning.summary: concise, auto, detailed
SUMMARY_CUT: Final = "trtllm.summary.cut"  # the summary ended before its text did
AGENT_DEPTH: Final = "trtllm.agent.depth"  # a sub-agent's depth (1: spawned by the root)
