"""The request layer's face (``request/__init__.py``): each name said once, ``__all__`` pinned (httpx's style).

The face names its exports once, in the ``from .module import A, B`` statements a type checker reads;
``core.lazy_face`` makes ``__all__`` and the on-first-use ``__getattr__`` from them. Here: the names are
the ones the face has always exported, each is its module's own object, and importing the face loads
none of its modules (a render worker, which imports it, loads only what it reads).
"""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import trtllm_responses.request as request
from trtllm_responses.core import lazy_face

#: The request layer's public names.
EXPORTS = """
    AFFINITY_HEADERS AgentMessage BodyDecoder CODE_TOOLS ChatOptions ChatRequest ChooseAllowed
    ChooseHosted ChooseMcp ChooseTool CodeInterpreterCall Compaction CompactionTrigger
    ConfigurationUpdate CustomTool CustomToolCall CustomToolCallOutput DEFAULT_REPLAY_PREFIX_BYTES
    EFFORT_LEVELS FunctionCall FunctionCallOutput FunctionTool HOSTED_TOOL_TYPES HostedTool
    INLINE_PARSE_BYTES INLINE_PARSE_VALUES InputItem ItemReference JsonBody JsonObjectFormat
    JsonSchemaFormat MAX_JSON_VALUES MAX_SESSION_KEY MULTI_AGENT_BETA MULTI_AGENT_NAMESPACE
    McpApprovalRequest McpApprovalResponse McpCall McpListTools McpTool Message MessagesOptions
    MessagesRequest MessagesTranslation MultiAgentCall MultiAgentCallOutput MultiAgentConfig
    NamespaceTool PlainText ROOT_AGENT Reasoning ReasoningEffort ReasoningParam ReplayPrefixes
    RequestTool ResponsesRequest SERVICE_TIERS SESSION_HEADER TextConfig ToolChoice ToolSearchCall
    ToolSearchOutput ToolSearchTool WEB_SEARCH_TOOLS WebSearchCall cache_retention_seconds check_depth
    choice_data count_values decode_body deferred json_object
    key_of_cache_key list_page_json multi_agent_beta normalize_input_items not_convertible page_json
    page_of parse_item parse_items parse_multi_agent parse_request parse_text parse_text_update
    service_tier session_key_from_headers tools_data translate_chat translate_messages
""".split()


def test_all_is_pinned() -> None:
    assert request.__all__ == sorted(EXPORTS)


def test_each_name_is_its_modules_own() -> None:
    face = ast.parse(Path(request.__file__).read_text())
    for node in ast.walk(face):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            module = importlib.import_module(f"trtllm_responses.request.{node.module}")
            for alias in node.names:
                assert getattr(request, alias.name) is getattr(module, alias.name), alias.name


def test_importing_the_face_loads_none_of_its_modules() -> None:
    code = "import sys, trtllm_responses.request; print([m for m in sys.modules if m.startswith('trtllm_responses.request.')])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"


def test_lazy_face_reads_the_type_checking_imports_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "face_pkg"
    package.mkdir()
    (package / "one.py").write_text("A = 1\nB = 2\nHIDDEN = 3\n")
    (package / "two.py").write_text("C = 4\n")
    (package / "__init__.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "from os import sep\n"
        "if TYPE_CHECKING:\n"
        "    from .one import A, B\n"
        "    from .two import C\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    exported, resolve = lazy_face("face_pkg", str(package / "__init__.py"))
    assert exported == ["A", "B", "C"]  # not ``sep``, not ``HIDDEN``
    importlib.import_module("face_pkg")
    assert (resolve("B"), resolve("C")) == (2, 4)
    with pytest.raises(AttributeError):
        resolve("HIDDEN")
    sys.modules.pop("face_pkg", None)
    sys.modules.pop("face_pkg.one", None)
    sys.modules.pop("face_pkg.two", None)
