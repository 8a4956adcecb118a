"""Memory one request may hold, bounded by what it asked for: logprobs (issue 30, point 4).

Before: one 105-byte chat request (n 16, top_logprobs 20, 6,000 tokens) raised the server's RSS by
2.15 GB and kept it. Logprob entries (choices x (top_logprobs + 1) x output tokens) are now capped at
``MAX_LOGPROB_ENTRIES`` (docs/limits.md#hostile-input-and-limits): an explicit max past it is a 400 before
anything is rendered, an implicit one stops there.
"""

from __future__ import annotations

import httpx
import pytest
from support.server_harness import RunningServer

from trtllm_responses.responses import prepared


def _chat(http: httpx.Client, **fields: object) -> httpx.Response:
    body = {"model": "m", "messages": [{"role": "user", "content": "#lorem 500"}], "logprobs": True, **fields}
    return http.post("/v1/chat/completions", json=body)


def test_the_default_cap_refuses_the_attack_before_generating(echo_server: RunningServer) -> None:
    with httpx.Client(base_url=echo_server.base_url, timeout=30) as http:
        refused = _chat(http, n=16, top_logprobs=20, max_tokens=6000)
        assert refused.status_code == 400
        error = refused.json()["error"]
        assert error["param"] == "max_tokens" and error["code"] == "too_many_logprobs"
        assert "at most 780 tokens" in error["message"]  # 2^18 // (16 x 21)
        answer = http.post(
            "/v1/responses",
            json={"model": "m", "input": "hi", "top_logprobs": 20, "max_output_tokens": 12_484},
        )
        assert answer.status_code == 400 and answer.json()["error"]["param"] == "max_output_tokens"


def test_logprob_entries_are_capped(echo_server: RunningServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(prepared, "MAX_LOGPROB_ENTRIES", 2 * 21 * 50)  # 2 choices x 21 a token: 50 tokens
    with httpx.Client(base_url=echo_server.base_url, timeout=30) as http:
        # An explicit max within the cap is served in full; one token past it is refused.
        served = _chat(http, n=2, top_logprobs=20, max_tokens=50)
        assert served.status_code == 200, served.text
        assert served.json()["usage"]["completion_tokens"] == 100
        refused = _chat(http, n=2, top_logprobs=20, max_tokens=51)
        assert refused.status_code == 400 and refused.json()["error"]["code"] == "too_many_logprobs"
        # Without a max, the output stops at the cap: finish_reason length, 50 tokens with logprobs each.
        implicit = _chat(http, n=2, top_logprobs=20).json()
        for choice in implicit["choices"]:
            assert choice["finish_reason"] == "length"
            assert len(choice["logprobs"]["content"]) <= 50
            assert all(len(lp["top_logprobs"]) == 20 for lp in choice["logprobs"]["content"])
        assert implicit["usage"]["completion_tokens"] == 100
        # Fewer alternatives leave room for more tokens; without logprobs there is no such cap.
        assert _chat(http, n=2, top_logprobs=0, max_tokens=1050).status_code == 200
        plain = {"model": "m", "messages": [{"role": "user", "content": "#lorem 500"}], "n": 2}
        assert http.post("/v1/chat/completions", json=plain).json()["usage"]["completion_tokens"] >= 1000
