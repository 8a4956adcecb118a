"""Each layer's face (its ``__init__.py``): ``__all__`` pinned, each name its module's own (httpx's style).

A face names its exports once: a top-level ``from .module import A, B`` for a name loaded with the face,
an ``if TYPE_CHECKING:`` one for a name resolved on first use; ``core.lazy_face`` makes ``__all__`` and
the on-first-use ``__getattr__`` from them. (``adapter``, ``executors``, ``stream`` and ``responses``,
whose names are all loaded with the face, keep a written ``__all__``.) Here, for every face: its
``__all__`` is the names it has always exported, each is the object its module defines, and importing
the face loads none of its modules but those it loaded before (a render worker imports ``harmony`` and
``request``; ``python -m trtllm_responses.cli.build`` must not load the server).
"""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

import pytest


class Face(NamedTuple):
    """A face's pins: its public names, and the most of its own modules importing it may load."""

    exports: str
    loads: str


FACES = {
    "core": Face(
        """
        APIError AuthenticationError ByteBoundedCache HarmonyFormatError HeadersTooLargeError
        InvalidRequestError LOOP_STEP_SECONDS LogprobsJSON LoopSteps MethodNotAllowedError
        NotFoundError OverloadedError RequestTimeoutError RequestTooLargeError ServerError
        ServiceUnavailableError Stepped TooManyRequestsError URLTooLongError VocabError at_once build_sdk_models
        check_id exact_bytes held_tokens json_string lazy_face letting_go new_id resolver sha256_file
        status_error to_dict to_json write_atomically
        """,
        "lazy",
    ),
    "ops": Face(
        """
        AccessRecord CollectorSchedule JsonFormatter LOG_FORMATS ServerMetrics merge_snapshots setup_logging
        trim_heap use_group_folder uvicorn_logging
        """,
        "",
    ),
    "tenants": Face(
        """
        Counters EngineFull FairShare LEASE_SECONDS Limits OPEN Quota RateLimitError RateLimiter
        SERVICE_TIER_ORDER Tenant TenantDirectory TenantFileError Tenants Ticket WINDOW_SECONDS Window
        hash_key limited presented_keys
        """,
        "",
    ),
    "request": Face(
        """
        AFFINITY_HEADERS AgentMessage BodyDecoder CODE_TOOLS ChatOptions ChatRequest ChooseAllowed
        ChooseHosted ChooseMcp ChooseTool CodeInterpreterCall Compaction CompactionTrigger
        ConfigurationUpdate CustomTool CustomToolCall CustomToolCallOutput
        DEFAULT_REPLAY_PREFIX_BYTES EFFORT_LEVELS FINAL_HEADER FunctionCall FunctionCallOutput FunctionTool
        HOSTED_TOOL_TYPES HostedTool INLINE_PARSE_BYTES INLINE_PARSE_VALUES InputItem ItemReference
        JsonBody JsonObjectFormat JsonSchemaFormat MAX_JSON_VALUES MAX_SESSION_KEY MULTI_AGENT_BETA
        MULTI_AGENT_NAMESPACE NO_IDENTITY McpApprovalRequest McpApprovalResponse McpCall McpListTools McpTool
        Message MessagesOptions MessagesRequest MessagesTranslation MultiAgentCall
        MultiAgentCallOutput MultiAgentConfig NamespaceTool PlainText ROOT_AGENT Reasoning
        ReasoningEffort ReasoningParam ReplayPrefixes RequestTool ResponsesRequest SERVICE_TIERS
        SESSION_HEADER SessionIdentity TextConfig ToolChoice ToolSearchCall ToolSearchOutput ToolSearchTool
        WEB_SEARCH_TOOLS WebSearchCall cache_retention_seconds check_depth checking_depth choice_data
        count_values decode_body deferred input_as_items json_object key_of_cache_key list_page_json
        multi_agent_beta normalize_input_items normalized_input_items normalized_item not_convertible
        page_json page_of parse_item parse_items parse_multi_agent parse_request parse_text
        parse_text_update parsing_request service_tier session_identity tools_data translate_chat
        translate_messages translating_chat translating_messages typing_items
        """,
        "",
    ),
    "harmony": Face(
        """
        ANSWER_HEADER BROWSER_PAGE BROWSER_PAGES CONFIG_EFFORT CONFIG_TEXT CallOption ChosenTools
        ContentDelta ConvertedInput FINAL_HEADERS FREE_CHANNELS HarmonyEncoding HarmonyStreamParser
        ItemKind ItemTarget JSON_CONTENT_TYPE JsonCut LOADED_TOOL MODEL_READ MessageEnded
        MessageHeader MessageStarted ParsedMessage RenderPool RequestTools SpelledControlTokens
        TOOL_SEARCH Tool VOCAB_FILENAME VOCAB_SHA256 build_output_item builtin_types_shown
        call_headers call_options callable_header check_strict choose_tools classify
        completion_to_output_items convert_item developer_message developer_spec ensure_vocab
        input_to_messages items_to_messages list_tools_key load_encoding loaded_tools
        mcp_output_text minimal_instance new_item_ids parse_completion recipient_candidates returned_reasoning
        server_call_options trailing_recipient unreadable_message
        """,
        "completion encoding headers input_messages items linear parser tool_choice tools",
    ),
    "constraints": Face(
        """
        Constraint ResponseFormat build_constraint check_grammar parse_text_format structural_tag
        """,
        "base",
    ),
    "adapter": Face(
        """
        ConversationHistory DEFAULT_RENDER_CACHE_BYTES EMPTY_HISTORY HarmonyAdapter ItemRenders
        Prompt RenderedMessage
        """,
        "adapter item_renders prompt",
    ),
    "executors": Face(
        """
        EchoExecutor Executor ExecutorError Generating GenerationRequest SamplingSettings TokenDelta
        """,
        "base echo",
    ),
    "stream": Face(
        """
        AgentItem ResponseStream RunControl StreamStateError TextRewriter TokenStreamProcessor
        make_usage
        """,
        "agent_items events item response summary tokens tool_items",
    ),
    "tools": Face(
        """
        ApprovedCall Coordinator DEFAULT_TOOL_TIMEOUT MultiAgentProvider PythonLimits
        SandboxUnavailable ServerTools ToolNamespace ToolOutcome ToolProvider ToolSettings
        UNAVAILABLE_KINDS UnavailableTool agent_session agent_span finish_tool_span parse_allow_private
        prepare_server_tools setup_sandbox tool_span truncate_output url_allowed
        """,
        "base settings",
    ),
    "store": Face(
        """
        CodecError ConversationHead ConversationHistoryStore ConversationItem ConversationPage Parent
        RedisStore ResponseStore SQLiteStore ScopedStore StoreStats StoredConversation StoredResponse
        decode_entry encode_entry item_ids open_store scoped
        """,
        "base codec counters from_url memory scoped",
    ),
    "responses": Face(
        """
        Admission AdmissionLimits BackgroundLimits BackgroundRun Chain ClientLeft ContentSealer ConversationsService Framing Held Origin
        PreparedResponse PromptTemplates ResponseRun ResponsesService RunState Runs SamplingDefaults
        Steer SteerRefused Steered Steering SubagentLimits Successor as_items check_defaults
        load_key
        """,
        "background budget cache_diagnostics chains compaction conversations delta_pump frame_log gate generation keeping kv_release logprobs prepare prepared prompts references relay rendering run runs sampling sealing service sessions span_content spans steering subagent_limits subagents summaries tool_loop truncation unstored",
    ),
    "server": Face(
        """
        HTTPLimits MAX_SERVE_FRONTENDS ServerConfig create_app frontend_socket_path
        group_metrics_dir uvicorn_config
        """,
        "app body call config conversation_routes create dialects dialects.chat dialects.chat_chunks dialects.edge dialects.messages dialects.messages_events errors group http_limits loop_routes openapi operations responses router routes spans sse websocket websocket_deflate websocket_drain websocket_pacing",
    ),
    "cli": Face(
        """
        main
        """,
        "",
    ),
}


@pytest.mark.parametrize("layer", sorted(FACES))
def test_all_is_pinned(layer: str) -> None:
    face = importlib.import_module(f"trtllm_responses.{layer}")
    assert sorted(face.__all__) == sorted(FACES[layer].exports.split())
    assert len(set(face.__all__)) == len(face.__all__)


def _imports_of(face_file: str) -> list[tuple[str, str]]:
    """(module, name) for each ``from .module import name`` of a face, top level or under TYPE_CHECKING."""
    return [
        (node.module, alias.name)
        for node in ast.walk(ast.parse(Path(face_file).read_text()))
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module
        for alias in node.names
    ]


@pytest.mark.parametrize("layer", sorted(FACES))
def test_each_name_is_its_modules_own(layer: str) -> None:
    face = importlib.import_module(f"trtllm_responses.{layer}")
    imported = _imports_of(face.__file__)
    assert {name for _, name in imported} == set(face.__all__)
    for module, name in imported:
        defining = importlib.import_module(f"trtllm_responses.{layer}.{module}")
        assert getattr(face, name) is getattr(defining, name), f"{layer}.{name}"


@pytest.mark.parametrize("layer", sorted(FACES))
def test_importing_the_face_loads_no_more_of_its_modules(layer: str) -> None:
    package = f"trtllm_responses.{layer}"
    code = f"import sys, {package}; print(' '.join(m for m in sys.modules if m.startswith('{package}.')))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    loaded = {name[len(package) + 1 :] for name in out.stdout.split()}
    assert loaded <= set(FACES[layer].loads.split())


def test_lazy_face_reads_the_faces_own_imports_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = tmp_path / "face_pkg"
    package.mkdir()
    (package / "one.py").write_text("A = 1\nB = 2\nHIDDEN = 3\n")
    (package / "two.py").write_text("C = 4\n")
    (package / "three.py").write_text("D = 5\n")
    (package / "__init__.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "from os import sep\n"
        "from trtllm_responses.core import lazy_face\n"
        "from .three import D\n"
        "if TYPE_CHECKING:\n"
        "    from .one import A, B\n"
        "    from .two import C\n"
        "__all__ = lazy_face(globals())\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        face = importlib.import_module("face_pkg")
        assert face.__all__ == ["A", "B", "C", "D"]  # not ``sep``, ``lazy_face`` or ``HIDDEN``
        assert "face_pkg.one" not in sys.modules and face.D == 5  # ``D`` came with the face, ``A`` waits
        assert (face.B, face.C) == (2, 4)
        assert "face_pkg.one" in sys.modules and vars(face)["B"] == 2  # kept in the package once resolved
        with pytest.raises(AttributeError, match="HIDDEN"):
            face.HIDDEN  # noqa: B018
        with pytest.raises(AttributeError):
            face.__getattr__("D")  # loaded with the face, so never the resolver's
    finally:
        for name in ("face_pkg", "face_pkg.one", "face_pkg.two", "face_pkg.three"):
            sys.modules.pop(name, None)
