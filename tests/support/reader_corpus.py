"""A corpus of what gpt-oss writes, from public sources, with the outcome each must have.

Each case is a completion as the model wrote it (Harmony text with its control tokens, what
follows the prompt's ``<|start|>assistant``), where it comes from, the request it answers (its
tools, its text format), and what the response must be: its status and, per output item, a
summary (``summarize``). ``test_reader_corpus.py`` replays every case through the echo
executor's ``#harmony`` raw mode (and a few through the fake TensorRT-LLM), streamed and not.

Where a case needed changing to replay (a ``<|return|>`` in the middle of a fixture is a stop
token to the engine), the note says so. Sources:

- openai/harmony ``tests/test_harmony.py`` and ``test-data/`` (its own parser's fixtures,
  including what its non-strict parser recovers from);
- vLLM ``tests/tool_use/test_openai_tool_parser.py`` (gpt-oss tool-call fixtures) and its issues
  (vllm-project/vllm#45570: gpt-oss-120b writes ``final <|constrain|>json`` under a response schema;
  #28000: ``<|constrain|>JSON``);
- llama.cpp#27720 (a junk ``<|channel|>??<|end|>`` in about 4% of gpt-oss-20b turns at temperature 1);
- the deviations issue 17 of this project lists as seen from gpt-oss in bug reports (repeated
  ``<|start|>``/roles, stray text between messages, ``final__HANDOFF__``, hallucinated namespaces
  ``repo_browser``/``container``, glued names, prose after arguments);
- issue 31's (:data:`ISSUE_31`): openai/harmony#80 (gpt-oss-120b's refusal token stream, no header),
  aldehir/gpt-oss-tool-calling-notebook's recorded gpt-oss-20b turns under llama.cpp (2,939 turns in
  ``experiments/``: headerless text before a header, ``commentary ...?``, analysis closed by
  ``<|return|>``), ollama's ``harmony/harmonyparser_test.go`` (a word after the recipient, no channel, a
  junk ``thinking`` channel, ``get-weather`` as a tool name), sglang's ``test/srt/test_harmony_parser.py``
  (text before the first header, channels in capitals), vLLM#22337 (gpt-oss-120b writing its call as
  the answer's text) and the shapes issue 31's "Why" lists.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "Weather of a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


def function(name: str) -> dict[str, Any]:
    return {"type": "function", "name": name, "parameters": {"type": "object", "properties": {}}}


PLACE_SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
    "additionalProperties": False,
}
JSON_FORMAT = {"format": {"type": "json_schema", "name": "place", "schema": PLACE_SCHEMA, "strict": True}}
NOT_AVAILABLE = "returned: Error: Tool '"


@dataclass(frozen=True)
class Case:
    """One completion, its source, the request around it, and the response it must give."""

    name: str
    source: str
    completion: str
    status: str
    items: list[tuple[str, ...]]
    tools: list[dict[str, Any]] = field(default_factory=list)
    text: dict[str, Any] | None = None
    max_output_tokens: int | None = None


def summarize(item: dict[str, Any]) -> tuple[str, ...]:
    """An output item in the corpus's terms: its type and what the model meant by it."""
    kind = item["type"]
    if kind == "message":
        return ("message", item["content"][0]["text"])
    if kind == "reasoning":
        return ("reasoning", "".join(c["text"] for c in item.get("content") or []))
    if kind in ("function_call", "custom_tool_call"):
        return (
            kind,
            item["name"],
            item.get("arguments", item.get("input")),
            item.get("status") or "completed",
        )
    if kind == "mcp_call":
        return (kind, f"{item['server_label']}.{item['name']}", item["status"])
    return (kind, item["status"])


def matches(expected: tuple[str, ...], got: tuple[str, ...]) -> bool:
    """``expected`` equals ``got``; a last field ending in ``…`` matches as a prefix, one starting with it as a suffix."""
    if len(expected) != len(got) or expected[:-1] != got[:-1]:
        return False
    want, have = expected[-1], got[-1]
    if want.endswith("…"):
        return have.startswith(want[:-1])
    if want.startswith("…"):
        return want[1:] in have
    return want == have


H = "https://github.com/openai/harmony/blob/main/"
CORPUS: list[Case] = [
    Case(
        "harmony_simple_tool_call_bare_name",
        H + "test-data/test_simple_tool_call.txt (the <|return|> after the analysis made <|end|> to replay)",
        '<|channel|>analysis<|message|>User asks: "What is the weather in Tokyo?" We need to use lookup_weather '
        'tool.<|end|><|start|>assistant to=lookup_weather<|channel|>analysis code<|message|>{"location": "Tokyo"}<|call|>',
        "completed",
        [
            ("reasoning", 'User asks: "What is the weather in Tokyo?" We need to use lookup_weather tool.'),
            ("function_call", "lookup_weather", '{"location": "Tokyo"}', "completed"),
        ],
        tools=[function("lookup_weather")],
    ),
    Case(
        "harmony_missing_message_after_channel",
        H + "tests/test_harmony.py test_streamable_parser_missing_message_token_other_initial_headers",
        "<|channel|>analysis I must refuse<|end|><|start|>assistant<|channel|>analysis<|message|>We must refuse"
        "<|end|><|start|>assistant<|channel|>final<|message|>I'm sorry, but I can't help with that.<|return|>",
        "completed",
        [
            ("reasoning", "I must refuse"),
            ("reasoning", "We must refuse"),
            ("message", "I'm sorry, but I can't help with that."),
        ],
    ),
    Case(
        "harmony_missing_message_no_header",
        H + "tests/test_harmony.py test_streamable_parser_missing_message_token",
        "I must refuse<|end|><|start|>assistant<|channel|>analysis<|message|>We must refuse<|end|>"
        "<|start|>assistant<|channel|>final<|message|>I'm sorry, but I can't help with that.<|return|>",
        "completed",
        [
            ("reasoning", "I must refuse"),  # text with no header, a message after it: reasoning (issue 31)
            ("reasoning", "We must refuse"),
            ("message", "I'm sorry, but I can't help with that."),
        ],
    ),
    Case(
        "harmony_missing_message_then_call",
        H + "tests/test_harmony.py test_streamable_parser_missing_message_token_tool_call",
        "... Let's use the tool.<|end|><|start|>assistant to=functions.get_weather<|channel|>commentary json"
        '<|message|>{"location": "Tokyo"}<|call|>',
        "completed",
        [
            ("reasoning", "... Let's use the tool."),
            ("function_call", "get_weather", '{"location": "Tokyo"}', "completed"),
        ],
        tools=[WEATHER],
    ),
    Case(
        "harmony_constrain_adjacent_recipient_first",
        H
        + "tests/test_harmony.py test_tool_call_with_constrain_marker_adjacent (its <|start|>assistant repeated)",
        "<|start|>assistant to=functions.get_weather<|channel|>commentary"
        '<|constrain|>json<|message|>{"location": "Tokyo"}<|call|>',
        "completed",
        [("function_call", "get_weather", '{"location": "Tokyo"}', "completed")],
        tools=[WEATHER],
    ),
    Case(
        "harmony_constrain_adjacent_channel_first",
        H + "tests/test_harmony.py test_tool_call_with_channel_before_recipient_and_constrain_adjacent",
        "<|channel|>commentary to=functions.get_weather"
        '<|constrain|>json<|message|>{"latitude":48.8566,"longitude":2.3522}<|call|>',
        "completed",
        [("function_call", "get_weather", '{"latitude":48.8566,"longitude":2.3522}', "completed")],
        tools=[WEATHER],
    ),
    Case(
        "harmony_browser_search_undeclared",
        H + "test-data/test_streamable_parser.txt (browser not declared: nobody runs it)",
        "<|channel|>analysis<|message|>Let's browse to confirm.<|end|><|start|>assistant<|channel|>commentary "
        'to=browser.search code<|message|>{"query": "current US president July 2025", "topn": 10}<|call|>'
        '<|start|>browser.search to=assistant<|channel|>commentary<|message|>{"result": "https://openai.com/"}<|end|>',
        "completed",
        [
            ("reasoning", "Let's browse to confirm."),
            ("web_search_call", "failed"),
            ("reasoning", "Got browser.search output."),
            ("message", "browser.search " + NOT_AVAILABLE + "browser.search' is not available…"),
        ],
    ),
    Case(
        "vllm_call_without_content_type",
        "vllm tests/tool_use/test_openai_tool_parser.py test_extract_tool_calls_multiple_tools (functions.no_content_type)",
        '<|channel|>commentary to=functions.no_content_type<|message|>{"location": "Tokyo"}<|call|>',
        "completed",
        [("function_call", "no_content_type", '{"location": "Tokyo"}', "completed")],
        tools=[function("no_content_type")],
    ),
    Case(
        "vllm_call_with_plain_text_arguments",
        "vllm tests/tool_use/test_openai_tool_parser.py test_extract_tool_calls_multiple_tools (not_json_no_content_type)",
        "<|channel|>commentary to=functions.not_json_no_content_type<|message|>foo<|call|>",
        "completed",
        [("function_call", "not_json_no_content_type", "foo", "completed")],
        tools=[function("not_json_no_content_type")],
    ),
    Case(
        "vllm_final_with_json_content_type",
        "vllm-project/vllm#45570 (gpt-oss-120b with a response schema)",
        "<|channel|>analysis<|message|>Return JSON.<|end|><|start|>assistant<|channel|>final <|constrain|>json"
        '<|message|>{"city":"Paris"}<|return|>',
        "completed",
        [("reasoning", "Return JSON."), ("message", '{"city":"Paris"}')],
        text=JSON_FORMAT,
    ),
    Case(
        "vllm_final_with_upper_case_json",
        "vllm-project/vllm#28000 (<|constrain|>JSON)",
        '<|channel|>final<|constrain|>JSON<|message|>{"city":"Lyon"}<|return|>',
        "completed",
        [("message", '{"city":"Lyon"}')],
        text=JSON_FORMAT,
    ),
    Case(
        "llamacpp_junk_channel_before_answer",
        "ggml-org/llama.cpp#27720 (gpt-oss-20b, temperature 1)",
        "<|channel|>??<|end|><|start|>assistant<|channel|>final<|message|>Paris is the capital.<|return|>",
        "completed",
        [("message", "Paris is the capital.")],
    ),
    Case(
        "junk_channel_with_body_is_reasoning",
        "issue 17, Why 1 (junk channel before <|message|>)",
        "<|channel|>thoughts<|message|>hmm<|end|><|start|>assistant<|channel|>final<|message|>ok<|return|>",
        "completed",
        [("reasoning", "hmm"), ("message", "ok")],
    ),
    Case(
        "empty_channel_is_reasoning",
        "issue 17, Why 1 (empty channel)",
        "<|channel|><|message|>x<|end|><|start|>assistant<|channel|>final<|message|>y<|return|>",
        "completed",
        [("reasoning", "x"), ("message", "y")],
    ),
    Case(
        "production_final_without_message_token",
        "issue 17, Why 1 (<|channel|>final__HANDOFF__<|return|>, captured in production)",
        "<|channel|>final__HANDOFF__<|return|>",
        "completed",
        [("message", "__HANDOFF__")],
    ),
    Case(
        "repeated_start",
        "issue 17, Why 1 (a repeated <|start|>)",
        "<|channel|>analysis<|message|>a<|end|><|start|>assistant<|start|>assistant<|channel|>final<|message|>b<|return|>",
        "completed",
        [("reasoning", "a"), ("message", "b")],
    ),
    Case(
        "repeated_role",
        "issue 17, Why 1 (assistantassistant)",
        "<|channel|>analysis<|message|>a<|end|><|start|>assistantassistant<|channel|>final<|message|>b<|return|>",
        "completed",
        [("reasoning", "a"), ("message", "b")],
    ),
    Case(
        "newline_between_messages",
        "issue 17, Why 1 (stray text or a newline between messages)",
        "<|channel|>analysis<|message|>a<|end|>\n\n<|start|>assistant<|channel|>final<|message|>b<|return|>",
        "completed",
        [("reasoning", "a"), ("message", "b")],
    ),
    Case(
        "text_between_messages",
        "issue 17, Why 1 (stray text between messages)",
        "<|channel|>analysis<|message|>a<|end|>assistant<|channel|>final<|message|>b<|return|>",
        "completed",
        [("reasoning", "a"), ("message", "b")],
    ),
    Case(
        "control_token_inside_header",
        "issue 17, Why 1 (a control token inside a header)",
        "<|channel|>final<|end|><|start|>assistant<|channel|>final<|message|>b<|return|>",
        "completed",
        [("message", "b")],
    ),
    Case(
        "refusal_without_header",
        "issue 17, Why 1 (a refusal written with no header at all)",
        "I'm sorry, but I can't help with that.<|return|>",
        "completed",
        [("message", "I'm sorry, but I can't help with that.")],
    ),
    Case(
        "end_then_return",
        "issue 17, Why 5 (<|end|><|return|> after a complete final)",
        "<|channel|>final<|message|>done<|end|><|return|>",
        "completed",
        [("message", "done")],
    ),
    Case(
        "final_closed_by_end",
        "issue 17, Why 5 (a final closed by <|end|>, then nothing: the engine runs to its limit)",
        "<|channel|>final<|message|>done<|end|>",
        "completed",
        [("message", "done")],
    ),
    Case(
        "call_closed_by_end",
        "issue 17, Why 5 (a call closed by <|end|>)",
        '<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city":"Paris"}<|end|>',
        "completed",
        [("function_call", "get_weather", '{"city":"Paris"}', "completed")],
        tools=[WEATHER],
    ),
    Case(
        "repeated_namespace",
        "issue 17, Why 5 (functions.functions.x)",
        '<|channel|>commentary to=functions.functions.get_weather <|constrain|>json<|message|>{"city":"Oslo"}<|call|>',
        "completed",
        [("function_call", "get_weather", '{"city":"Oslo"}', "completed")],
        tools=[WEATHER],
    ),
    Case(
        "glued_json",
        "issue 17, Why 5 (shelljson)",
        '<|channel|>commentary to=functions.shelljson<|message|>{"cmd":["ls"]}<|call|>',
        "completed",
        [("function_call", "shell", '{"cmd":["ls"]}', "completed")],
        tools=[function("shell")],
    ),
    Case(
        "glued_channel_marker",
        "issue 17, Why 5 (exec<|channel|>commentary)",
        '<|start|>assistant to=exec<|channel|>commentary json<|message|>{"cmd":"ls"}<|call|>',
        "completed",
        [("function_call", "exec", '{"cmd":"ls"}', "completed")],
        tools=[function("exec")],
    ),
    Case(
        "prose_after_arguments",
        "issue 17, Why 5 (prose after a complete object)",
        '<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city":"Rome"} Let me '
        "call it.<|call|>",
        "completed",
        [("function_call", "get_weather", '{"city":"Rome"}', "completed")],
        tools=[WEATHER],
    ),
    Case(
        "second_json_value_after_arguments",
        "issue 17, Why 5 (a second JSON value after a complete object)",
        '<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city":"Rome"}{"city":"Bern"}<|call|>',
        "completed",
        [("function_call", "get_weather", '{"city":"Rome"}', "completed")],
        tools=[WEATHER],
    ),
    Case(
        "hallucinated_repo_browser",
        "issue 17, Why 4 (repo_browser.open_file, a namespace nobody declared)",
        '<|channel|>commentary to=repo_browser.open_file <|constrain|>json<|message|>{"path":"README.md"}<|call|>',
        "completed",
        [
            ("mcp_call", "repo_browser.open_file", "failed"),
            ("reasoning", "Got repo_browser.open_file output."),
            (
                "message",
                "repo_browser.open_file " + NOT_AVAILABLE + "repo_browser.open_file' is not available…",
            ),
        ],
        tools=[WEATHER],
    ),
    Case(
        "hallucinated_container_exec",
        "issue 17, Why 4 (container.exec)",
        '<|channel|>analysis to=container.exec code<|message|>{"cmd":["ls"]}<|call|>',
        "completed",
        [
            ("mcp_call", "container.exec", "failed"),
            ("reasoning", "Got container.exec output."),
            ("message", "…The tools you can call: functions.get_weather."),
        ],
        tools=[WEATHER],
    ),
    Case(
        "python_not_run",
        "issue 17, Why 4 (python when nobody runs it)",
        "<|channel|>analysis to=python code<|message|>print(1)<|call|>",
        "completed",
        [
            ("code_interpreter_call", "failed"),
            ("reasoning", "Got python output."),
            ("message", "python " + NOT_AVAILABLE + "python' is not available…"),
        ],
    ),
    Case(
        "to_assistant_preamble",
        "issue 17, Why 4 (a to=assistant preamble)",
        "<|channel|>commentary to=assistant<|message|>Checking.<|end|><|start|>assistant<|channel|>final"
        "<|message|>Done.<|return|>",
        "completed",
        [("message", "Checking."), ("message", "Done.")],
    ),
    Case(
        "imagined_tool_reply_is_skipped",
        "openai/harmony test-data/test_tool_response_parsing.txt (a tool's message, written by the model)",
        "<|channel|>analysis<|message|>a<|end|><|start|>functions.get_weather to=assistant<|channel|>commentary"
        '<|message|>{"temp": 20}<|end|><|start|>assistant<|channel|>final<|message|>It is 20.<|return|>',
        "completed",
        [("reasoning", "a"), ("message", "It is 20.")],
    ),
    Case(
        "control_token_inside_body_dropped",
        "issue 17, Why 1 (a control token inside a body)",
        "<|channel|>final<|message|>Hello <|constrain|>world<|return|>",
        "completed",
        [("message", "Hello world")],
    ),
    Case(
        "forgotten_end_before_start",
        "issue 17, Why 1 (a control token inside a body: <|start|> with no <|end|>)",
        "<|channel|>analysis<|message|>think<|start|>assistant<|channel|>final<|message|>ok<|return|>",
        "completed",
        [("reasoning", "think"), ("message", "ok")],
    ),
    Case(
        "forgotten_start_before_channel",
        "issue 17, Why 1 (<|channel|> with no <|start|>assistant between messages)",
        "<|channel|>analysis<|message|>think<|end|><|channel|>final<|message|>ok<|return|>",
        "completed",
        [("reasoning", "think"), ("message", "ok")],
    ),
    Case(
        "arguments_glued_to_header",
        "issue 17, Why 1 (a header without <|message|>: the arguments glued to the content type)",
        '<|channel|>commentary to=functions.get_weather json{"city":"Nice"}<|call|>',
        "completed",
        [("function_call", "get_weather", '{"city":"Nice"}', "completed")],
        tools=[WEATHER],
    ),
    Case(
        "nothing_readable",
        "issue 17, Build 1 (nothing usable: fails saying what the model wrote; the model ends it, issue 31)",
        "<|channel|>??<|end|><|return|>",
        "failed",
        [],
    ),
]


AL = "https://github.com/aldehir/gpt-oss-tool-calling-notebook/blob/main/experiments/provider=llama.cpp/"
OLLAMA = "https://github.com/ollama/ollama/blob/main/harmony/harmonyparser_test.go "
SGLANG = "https://github.com/sgl-project/sglang/blob/main/test/srt/test_harmony_parser.py "
HARMONY_80 = (
    "...\n\nThe user is requesting instructions to break a food truck (i.e., sabotage, illegal activity). "
    "This is disallowed content: instructions facilitating wrongdoing. Must refuse. According to policy, "
    "we must refuse."
)
UNDECLARED = "returned: Error: Tool 'functions."

#: Issue 31's shapes, by the point of its "Why" they show (each replayed on the echo and the fake
#: TensorRT-LLM, streamed and not, and through Chat Completions: ``test_reader_meaning.py``).
ISSUE_31: dict[str, list[Case]] = {
    "1 a stray word is not a call": [
        Case(
            "sglang_text_before_the_first_header",
            SGLANG
            + "test_parse_with_interspersed_text (its text after <|return|> cannot replay: a stop token)",
            "Some text <|channel|>analysis<|message|>reasoning<|end|> more text "
            "<|start|>assistant<|channel|>final<|message|>answer<|return|>",
            "completed",
            [("reasoning", "Some text"), ("reasoning", "reasoning"), ("message", "answer")],
            tools=[WEATHER],
        ),
        Case(
            "stray_word_in_a_commentary_header",
            "issue 31, Why 1 (<|channel|>commentary 2?<|message|>)",
            "<|channel|>commentary 2?<|message|>Checking the weather.<|end|><|start|>assistant<|channel|>final"
            "<|message|>Sunny.<|return|>",
            "completed",
            [("message", "Checking the weather."), ("message", "Sunny.")],
            tools=[WEATHER],
        ),
        Case(
            "space_after_the_channel_marker",
            "issue 31, Why 1 (<|channel|> final<|message|>Hi)",
            "<|channel|> final<|message|>Hi<|return|>",
            "completed",
            [("message", "Hi")],
            tools=[WEATHER],
        ),
        Case(
            "channel_written_twice",
            "issue 31, Why 1 (analysis.analysis: a channel word where the recipient goes)",
            "<|channel|>analysis analysis<|message|>Think.<|end|><|start|>assistant<|channel|>final"
            "<|message|>Hi<|return|>",
            "completed",
            [("reasoning", "Think."), ("message", "Hi")],
        ),
        Case(
            "stray_tool_name_on_final",
            "issue 31, Build 1 (never a call on final)",
            "<|channel|>final get_weather<|message|>Sunny in Paris.<|return|>",
            "completed",
            [("message", "Sunny in Paris.")],
            tools=[WEATHER],
        ),
        Case(
            "stray_word_naming_a_declared_tool",
            "openai/harmony's lone recipient (issue 17): still a call when it names a declared tool",
            '<|channel|>commentary get_weather <|constrain|>json<|message|>{"city":"Paris"}<|call|>',
            "completed",
            [("function_call", "get_weather", '{"city":"Paris"}', "completed")],
            tools=[WEATHER],
        ),
        Case(
            "ollama_word_after_the_recipient",
            OLLAMA + "TestHeaderParsing (extra token after the recipient is ignored)",
            '<|start|>assistant to=functions.get_weather abc<|channel|>commentary json<|message|>{"city":"Oslo"}'
            "<|call|>",
            "completed",
            [("function_call", "get_weather", '{"city":"Oslo"}', "completed")],
            tools=[WEATHER],
        ),
    ],
    "2 an answer is not hidden": [
        Case(
            "empty_channel_closed_by_return",
            "issue 31, Why 2 (an empty channel before a body closed by <|return|>)",
            "<|channel|><|message|>Paris.<|return|>",
            "completed",
            [("message", "Paris.")],
        ),
        Case(
            "prefix_of_final",
            "issue 31, Why 2 (fina)",
            "<|channel|>analysis<|message|>Short.<|end|><|start|>assistant<|channel|>fina<|message|>Paris.<|return|>",
            "completed",
            [("reasoning", "Short."), ("message", "Paris.")],
        ),
        Case(
            "channels_in_capitals",
            SGLANG + "test_extract_channel_type (ANALYSIS); issue 31, Why 2 (Final, FINAL)",
            "<|channel|>ANALYSIS<|message|>Think.<|end|><|start|>assistant<|channel|>Final<|message|>Paris.<|end|>"
            "<|start|>assistant<|channel|>FINAL<|message|>Lyon.<|return|>",
            "completed",
            [("reasoning", "Think."), ("message", "Paris."), ("message", "Lyon.")],
        ),
        Case(
            "ollama_junk_channel_thinking",
            OLLAMA + "TestHarmonyParserStreaming (implicit start with channel: <|channel|>thinking)",
            "<|channel|>thinking<|message|>Processing request<|end|><|start|>assistant<|channel|>final"
            "<|message|>Done.<|return|>",
            "completed",
            [("reasoning", "Processing request"), ("message", "Done.")],
        ),
        Case(
            "ollama_no_channel",
            OLLAMA + "TestHarmonyParserNonStreaming (<|start|>assistant<|message|>Hi!<|end|>)",
            "<|start|>assistant<|message|>Hi!<|end|>",
            "completed",
            [("message", "Hi!")],
        ),
        Case(
            "aldehir_analysis_closed_by_return",
            AL + "n=25/cities=5/cot=true/trial-22.md turn 4 (gpt-oss-20b's turn: analysis, then <|return|>)",
            "<|channel|>analysis<|message|>Next Austin<|return|>",
            "completed",
            [("reasoning", "Next Austin"), ("message", "Next Austin")],
            tools=[WEATHER],
        ),
    ],
    "3 reasoning is not shown": [
        Case(
            "harmony80_refusal_without_header",
            "https://github.com/openai/harmony/issues/80 (gpt-oss-120b's tokens; the issue's list ends at "
            "'…help with', completed with ' that.<|return|>')",
            HARMONY_80
            + "<|end|><|start|>assistant<|channel|>analysis<|message|>We must refuse.<|end|><|start|>"
            "assistant<|channel|>final<|message|>I’m sorry, but I can’t help with that.<|return|>",
            "completed",
            [
                ("reasoning", HARMONY_80),
                ("reasoning", "We must refuse."),
                ("message", "I’m sorry, but I can’t help with that."),
            ],
        ),
        Case(
            "aldehir_junk_before_reasoning",
            AL + "n=25/cities=15/cot=false/trial-22.md turn 15 (its reasoning shortened)",
            '…?<|end|><|start|>assistant<|channel|>analysis<|message|>The user asked: "Get the weather for the '
            'following cities". Call for each missing city.<|end|><|start|>assistant<|channel|>commentary '
            'to=functions.get_weather <|constrain|>json<|message|>{"city":"Austin"}<|call|>',
            "completed",
            [
                ("reasoning", "…?"),
                ("reasoning", 'The user asked: "Get the weather for the following cities". Call for each …'),
                ("function_call", "get_weather", '{"city":"Austin"}', "completed"),
            ],
            tools=[WEATHER],
        ),
        Case(
            "aldehir_headerless_reasoning_then_call",
            AL + "n=25/cities=10/cot=false/trial-1.md turn 16 (its reasoning shortened)",
            "………… …..…… ………?…… … ?…?……… …………\n\nThe conversation shows repeated calls to get_weather "
            "incorrectly. We should call the function for each city once, then produce a table. Let's do it."
            "<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"
            '{"city":"new york city"}<|call|>',
            "completed",
            [
                ("reasoning", "………… …..…… ………?…… … ?…?……… …………\n\nThe conversation shows…"),
                ("function_call", "get_weather", '{"city":"new york city"}', "completed"),
            ],
            tools=[WEATHER],
        ),
    ],
    "4 no answer built on an invented result": [
        Case(
            "ollama_call_then_imagined_reply",
            OLLAMA
            + "TestHarmonyParserHeaderEvent (a call, then the tool's reply; its <|call|> made <|end|> and "
            "a final built on the reply added, as issue 31's Why 4 saw)",
            '<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"location":"Tokyo"}'
            '<|end|><|start|>functions.get_weather to=assistant<|message|>{"sunny": true, "temperature": 20}'
            "<|end|><|start|>assistant<|channel|>final<|message|>It is 20°C and sunny in Tokyo.<|return|>",
            "completed",
            [("function_call", "get_weather", '{"location":"Tokyo"}', "completed")],
            tools=[WEATHER],
        ),
    ],
    "5 a cut is not a failure": [
        Case(
            "cut_inside_a_header",
            "issue 31, Why 5 (a completion the engine ended mid-header)",
            "<|channel|>commentary to=functions.get_wea",
            "incomplete",
            [],
            tools=[WEATHER],
        ),
        Case(
            "cut_inside_the_first_header",
            "issue 31, Why 5 (the budget runs out inside the first header)",
            "<|channel|>analysis<|message|>Think.<|end|>",
            "incomplete",
            [],
            max_output_tokens=2,
        ),
    ],
    "6 junk is not shown, an undeclared function is a function": [
        Case(
            "headless_junk_is_hidden",
            "issue 31, Why 6 (2? shown as text)",
            "<|channel|>commentary 2?<|end|><|start|>assistant<|channel|>final<|message|>Hi<|return|>",
            "completed",
            [("reasoning", "2?"), ("message", "Hi")],
        ),
        Case(
            "aldehir_commentary_question_marks",
            AL + "n=25/cities=15/cot=false/trial-7.md turn 13 (<|channel|>commentary ...?<|end|>; shortened)",
            "<|channel|>commentary ...?<|end|><|start|>assistant<|channel|>analysis<|message|>Call for each city."
            "<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"
            '{"city":"New York City"}<|call|>',
            "completed",
            [
                ("reasoning", "...?"),
                ("reasoning", "Call for each city."),
                ("function_call", "get_weather", '{"city":"New York City"}', "completed"),
            ],
            tools=[WEATHER],
        ),
        Case(
            "question_marks_before_any_header",
            "issue 31, Why 6 (?commentary? shown as text)",
            "?commentary?<|end|><|start|>assistant<|channel|>final<|message|>Hi<|return|>",
            "completed",
            [("reasoning", "?commentary?"), ("message", "Hi")],
        ),
        Case(
            "constrain_junk_without_message_token",
            "issue 31, Why 6 (<|constrain|>write: … in a message)",
            "<|channel|>commentary<|constrain|>write: notes<|end|><|start|>assistant<|channel|>final<|message|>"
            "Done.<|return|>",
            "completed",
            [("reasoning", "notes"), ("message", "Done.")],
        ),
        Case(
            "recipient_glued_to_reasoning",
            "issue 31, Why 6 (a call's JSON shown as a commentary message when <|channel|> came mid-reasoning)",
            "<|channel|>analysis<|message|>Need the weather. to=functions.get_weather<|channel|>commentary "
            '<|constrain|>json<|message|>{"city":"Paris"}<|call|>',
            "completed",
            [
                ("reasoning", "Need the weather. to=functions.get_weather"),
                ("function_call", "get_weather", '{"city":"Paris"}', "completed"),
            ],
            tools=[WEATHER],
        ),
        Case(
            "undeclared_function_without_mcp",
            "issue 31, Why 6 (an undeclared function as an mcp_call labelled functions)",
            '<|channel|>commentary to=functions.lookup <|constrain|>json<|message|>{"city":"Paris"}<|call|>',
            "completed",
            [
                ("reasoning", "Got lookup output."),
                ("message", "lookup " + UNDECLARED + "lookup' is not available. You have no tools…"),
            ],
        ),
        Case(
            "near_miss_function_name",
            OLLAMA + "TestFunctionConvertToValidChars (get-weather / get_weather); issue 31, Why 6",
            '<|channel|>commentary to=functions.get-weather <|constrain|>json<|message|>{"city":"Paris"}<|call|>',
            "completed",
            [
                ("reasoning", "Got get-weather output."),
                (
                    "message",
                    "get-weather " + UNDECLARED + "get-weather' is not available; did you mean "
                    "functions.get_weather? The tools you can call: functions.get_weather.",
                ),
            ],
            tools=[WEATHER],
        ),
        Case(
            "vllm22337_call_written_as_the_answer",
            "https://github.com/vllm-project/vllm/issues/22337 (gpt-oss-120b; its reasoning shortened): no call "
            "is invented from text",
            "<|channel|>analysis<|message|>The user asks current weather in Berlin.<|end|><|start|>assistant"
            '<|channel|>final<|message|>[{ "name": "get_weather", "parameters": { "city": "Berlin" } }]<|return|>',
            "completed",
            [
                ("reasoning", "The user asks current weather in Berlin."),
                ("message", '[{ "name": "get_weather", "parameters": { "city": "Berlin" } }]'),
            ],
            tools=[WEATHER],
        ),
        Case(
            "nonsense_is_unreadable",
            "issue 31, Why 6 (<|message|><|channel|><|start|>garbage<|end|><|return|>)",
            "<|message|><|channel|><|start|>garbage<|end|><|return|>",
            "failed",
            [],
        ),
    ],
}
CORPUS += [case for cases in ISSUE_31.values() for case in cases]
