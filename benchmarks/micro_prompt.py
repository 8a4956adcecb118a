"""Microbenchmark: building prompts, fresh and continuing stored conversations of ~1k, 10k, 100k tokens.

Each history is built turn by turn the way the server builds it (user turns,
then the echo executor's answers as output items, stored as a ConversationHistory).
For each, it times building the next prompt from the stored history (what
``previous_response_id`` does) and openai-harmony rendering the whole
conversation from scratch, and checks the two are equal token for token.

    python benchmarks/micro_prompt.py [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

from openai_harmony import Conversation, Message, Role

from trtllm_responses.adapter import EMPTY_HISTORY, ConversationHistory, HarmonyAdapter
from trtllm_responses.core.wire import to_dict
from trtllm_responses.executors.echo import EchoExecutor
from trtllm_responses.harmony import completion_to_output_items, load_encoding, parse_completion
from trtllm_responses.request.protocol import parse_request

WORDS = "the quick brown fox jumps over a lazy dog while seven wizards quietly judge boxing matches".split()


def build_history(
    adapter: HarmonyAdapter, echo: EchoExecutor, target_tokens: int, turn_tokens: int
) -> ConversationHistory:
    history = EMPTY_HISTORY
    turn = 0
    while history.num_tokens < target_tokens:
        words = " ".join(WORDS[(turn + i) % len(WORDS)] for i in range(max(1, turn_tokens // 2)))
        prompt = adapter.build_prompt(parse_request({"input": f"Turn {turn}: {words}"}), history)
        completion = echo.plan(prompt.token_ids)
        items = [
            to_dict(i) for i in completion_to_output_items(parse_completion(adapter.encoding, completion))
        ]
        history = adapter.continue_history(prompt, items)
        turn += 1
    return history


def without_finished_analysis(messages: list[Message]) -> list[Message]:
    """The documented gpt-oss rule, written out independently of the adapter: drop analysis before the last final."""
    finals = [
        i
        for i, m in enumerate(messages)
        if m.author.role == Role.ASSISTANT and m.channel == "final" and not m.recipient
    ]
    last = finals[-1] if finals else -1
    return [m for i, m in enumerate(messages) if not (m.channel == "analysis" and i < last)]


def time_it(fn: Any, repeat: int) -> float:
    runs = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - start)
    return statistics.median(runs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    encoding = load_encoding()
    adapter = HarmonyAdapter(encoding)
    echo = EchoExecutor(encoding)
    request = parse_request({"input": "And one more short question?", "instructions": "Be helpful."})
    results: dict[str, Any] = {
        "fresh_short_ms": round(time_it(lambda: adapter.build_prompt(request), 200) * 1000, 3),
        "histories": [],
    }
    for target, turn_tokens in ((1_000, 200), (10_000, 2_000), (100_000, 8_000)):
        history = build_history(adapter, echo, target, turn_tokens)
        prompt = adapter.build_prompt(request, history)
        kept = without_finished_analysis(prompt.messages)
        full = encoding.harmony.render_conversation_for_completion(
            Conversation.from_messages(kept), Role.ASSISTANT
        )
        assert prompt.token_ids == full, "incremental prompt differs from a full render"
        incremental = time_it(lambda h=history: adapter.build_prompt(request, h), 50)
        rerender = time_it(
            lambda k=kept: encoding.harmony.render_conversation_for_completion(
                Conversation.from_messages(k), Role.ASSISTANT
            ),
            5,
        )
        results["histories"].append(
            {
                "history_tokens": history.num_tokens,
                "messages": len(history.messages),
                "prompt_tokens": len(prompt.token_ids),
                "continue_ms": round(incremental * 1000, 3),
                "full_harmony_render_ms": round(rerender * 1000, 3),
                "equal_to_full_render": True,
            }
        )
    if args.json:
        print(json.dumps(results))
    else:
        print(f"fresh short request: {results['fresh_short_ms']} ms")
        for h in results["histories"]:
            print(
                f"history {h['history_tokens']:>7} tokens ({h['messages']} messages): continue {h['continue_ms']} ms,"
                f" full harmony render {h['full_harmony_render_ms']} ms, equal: {h['equal_to_full_render']}"
            )


if __name__ == "__main__":
    main()
