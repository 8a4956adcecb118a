"""The Grafana dashboard and the Prometheus alert rules in ``examples/`` against a live server's ``/metrics``
(docs/tracing-and-dashboards.md#dashboard-and-alerts).

One server on the fake TensorRT-LLM (engine gauges, KV reuse), with a tenants file, serves a few of every
kind of turn. Without Prometheus: every query of the dashboard (panels and template variables) and of the
rules names metrics that server exports, with the labels it has. With Prometheus (Debian's package, ``make
prometheus``): ``promtool check rules``, then a real Prometheus scrapes the server and evaluates every query
and rule: each is valid, and each panel's queries return data.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from support.paths import ROOT
from support.prometheus_harness import ALERTS, Prometheus, prometheus_binary, promtool_binary
from support.promql import exported_labels, grafana_expr, problems
from support.server_harness import ServerFactory
from support.tenant_files import write_tenants
from support.trtllm_harness import executor_for, fake_trtllm_importable

from trtllm_responses.harmony import HarmonyEncoding

DASHBOARD = ROOT / "examples" / "grafana" / "trtllm-responses.json"
#: The last schema version of Grafana's classic (v1) dashboard model (grafana/grafana,
#: apps/dashboard/pkg/migration/schemaversion/README.md: "Schema version 42 is the final version for the v1
#: dashboard API"); the backend's later v43.go only rewrites ``formatTime`` transformations, which this
#: dashboard has none of.
SCHEMA_VERSION = 42


def _dashboard() -> dict[str, Any]:
    return json.loads(DASHBOARD.read_text())  # type: ignore[no-any-return]


def _panel_queries(dashboard: dict[str, Any]) -> list[tuple[str, str]]:
    """Each panel target's ``(panel title, expr)``."""
    return [
        (panel["title"], target["expr"])
        for panel in dashboard["panels"]
        for target in panel.get("targets", [])
    ]


def _variable_queries(dashboard: dict[str, Any]) -> list[tuple[str, str, str]]:
    """Each query variable's ``(name, selector, label)`` of its ``label_values(selector, label)``."""
    out = []
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            selector, label = variable["definition"][len("label_values(") : -1].rsplit(",", 1)
            out.append((variable["name"], selector.strip(), label.strip()))
    return out


def _rules() -> list[dict[str, Any]]:
    return [rule for group in yaml.safe_load(ALERTS.read_text())["groups"] for rule in group["rules"]]


def _drive(base_url: str) -> None:
    """A few of every kind of turn: sessions of two tenants (cached prefixes), a background response, a Chat
    completion, a Messages call, a 400, and a third tenant's 429."""
    for tenant in ("a", "b"):
        with httpx.Client(
            base_url=base_url, timeout=60, headers={"authorization": f"Bearer key-{tenant}"}
        ) as c:
            previous = None
            for turn in range(3):
                body: dict[str, Any] = {"model": "gpt-oss", "input": f"turn {turn}: " + "words to keep " * 40}
                if previous:
                    body["previous_response_id"] = previous
                answer = c.post("/v1/responses", json=body, headers={"x-session-id": f"s-{tenant}"})
                assert answer.status_code == 200, answer.text
                previous = answer.json()["id"]
            background = c.post("/v1/responses", json={"input": "#lorem 40", "background": True})
            assert background.status_code == 200, background.text
            chat = c.post(
                "/v1/chat/completions", json={"model": "m", "messages": [{"role": "user", "content": "hi"}]}
            )
            assert chat.status_code == 200, chat.text
            messages = {"model": "m", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]}
            assert c.post("/v1/messages", json=messages).status_code == 200
            assert c.get("/v1/responses/nope").status_code == 400
    with httpx.Client(base_url=base_url, timeout=60, headers={"authorization": "Bearer key-c"}) as c:
        codes = [c.post("/v1/responses", json={"input": "hi"}).status_code for _ in range(2)]
        assert codes == [200, 429], codes


@pytest.fixture(scope="module")
def live(
    encoding: HarmonyEncoding, serve: ServerFactory, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, str]]:
    """A server that served every kind of turn: its base URL and its ``/metrics`` text."""
    tenants = write_tenants(tmp_path_factory.mktemp("tenants") / "tenants.json", c={"requests_per_minute": 1})
    with pytest.MonkeyPatch.context() as patch, fake_trtllm_importable():
        patch.setenv("FAKE_TRTLLM_VERSION", "1.4.0rc1")  # get_kv_cache_capacity: the KV gauges from the start
        executor = executor_for(encoding, enable_iter_perf_stats=True)
        running = serve(executor, tenants_file=str(tenants))
        try:
            _drive(running.base_url)
            text = httpx.get(running.base_url + "/metrics", timeout=10).text
            yield running.base_url, text
        finally:
            running.stop()


def test_the_dashboard_is_a_grafana_import() -> None:
    """The fields Grafana's dashboard import reads (its classic JSON model), every panel on the
    ``${datasource}`` variable, ids unique, panels inside the 24-column grid without overlapping."""
    dashboard = _dashboard()
    assert dashboard["schemaVersion"] == SCHEMA_VERSION and dashboard["uid"] and dashboard["title"]
    assert dashboard["id"] is None  # assigned by the Grafana that imports it
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert (
        variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    )
    assert {"instance", "frontend", "tenant"} <= set(variables)
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    taken: set[tuple[int, int]] = set()
    for panel in dashboard["panels"]:
        grid = panel["gridPos"]
        assert 0 <= grid["x"] and grid["x"] + grid["w"] <= 24, panel["title"]
        cells = {(grid["x"] + dx, grid["y"] + dy) for dx in range(grid["w"]) for dy in range(grid["h"])}
        assert not cells & taken, f"{panel['title']} overlaps another panel"
        taken |= cells
        if panel["type"] == "row":
            continue
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]
        refs = [target["refId"] for target in panel["targets"]]
        assert panel["targets"] and len(refs) == len(set(refs)), panel["title"]
        assert all(t["datasource"] == panel["datasource"] and t["expr"] for t in panel["targets"])
    assert "transformations" not in json.dumps(dashboard)  # see SCHEMA_VERSION


def test_every_query_names_metrics_and_labels_the_server_exports(live: tuple[str, str]) -> None:
    exported = exported_labels(live[1])
    dashboard = _dashboard()
    found = [
        f"panel {title!r}: {problem}"
        for title, expr in _panel_queries(dashboard)
        for problem in problems(grafana_expr(expr), exported)
    ]
    for name, selector, label in _variable_queries(dashboard):
        found += [f"variable {name}: {p}" for p in problems(grafana_expr(selector), exported)]
        metric = selector.split("{")[0]
        if label not in exported.get(metric, {}) and label != "instance":
            found.append(f"variable {name}: {metric} has no label {label!r}")
    found += [f"rule {r['alert']}: {p}" for r in _rules() for p in problems(r["expr"], exported)]
    assert not found, "\n".join(found)


@pytest.mark.parametrize(
    "broken, expected",
    [
        ("sum(rate(trtllm_request_total[5m]))", "trtllm_request_total is not exported"),
        ("sum by (tenant) (rate(trtllm_requests_total[5m]))", "which has no label 'tenant'"),
        ("sum(rate(trtllm_requests_total[5m])) by (model)", "which has no label 'model'"),
        ('sum(rate(trtllm_requests_total{code="500"}[5m]))', "has no label 'code'"),
        ('sum(rate(trtllm_tenant_tokens_total{kind="cache"}[5m]))', "never has kind='cache'"),
        (
            "histogram_quantile(0.99, sum by (le) (rate(trtllm_time_to_first_token_seconds[5m])))",
            "not exported",
        ),
    ],
)
def test_the_check_finds_a_query_the_server_cannot_answer(
    live: tuple[str, str], broken: str, expected: str
) -> None:
    """The check above fails on a metric or label the server does not export."""
    found = problems(broken, exported_labels(live[1]))
    assert any(expected in p for p in found), found


def test_every_rule_waits_and_says_its_severity_and_summary() -> None:
    for rule in _rules():
        assert rule["for"] and rule["labels"]["severity"] in ("warning", "critical"), rule["alert"]
        assert rule["annotations"]["summary"] and rule["annotations"]["description"], rule["alert"]


def test_promtool_checks_the_rules_and_the_config(tmp_path: Path) -> None:
    promtool = promtool_binary()
    if promtool is None:
        pytest.skip("promtool is not installed (make prometheus: Debian's prometheus package)")
    rules = subprocess.run([promtool, "check", "rules", str(ALERTS)], capture_output=True, text=True)
    assert rules.returncode == 0, rules.stdout + rules.stderr
    assert f"SUCCESS: {len(_rules())} rules found" in rules.stdout
    config = subprocess.run(
        [promtool, "check", "config", str(ALERTS.parent / "prometheus.yml")], capture_output=True, text=True
    )
    assert config.returncode == 0, config.stdout + config.stderr


def test_prometheus_evaluates_every_query_and_rule(live: tuple[str, str]) -> None:
    """A real Prometheus scrapes the server each second: every panel query returns data, every variable
    finds values, every rule is valid and evaluated without error."""
    if prometheus_binary() is None:
        pytest.skip("prometheus is not installed (make prometheus: Debian's prometheus package)")
    with Prometheus(live[0].removeprefix("http://")) as prometheus:
        _wait_for_scrapes(prometheus, 4)
        dashboard = _dashboard()
        empty = [
            f"{title}: {expr}"
            for title, expr in _panel_queries(dashboard)
            if not prometheus.query(grafana_expr(expr, rate_interval="15s"))
        ]
        assert not empty, "panel queries without data:\n" + "\n".join(empty)
        for name, selector, label in _variable_queries(dashboard):
            values = prometheus.api("label/" + label + "/values", **{"match[]": grafana_expr(selector)})
            assert values, f"variable {name} has no values"
        for rule in _rules():
            prometheus.query(rule["expr"])  # valid (an error fails in api())
        _wait_for_rules(prometheus, {rule["alert"] for rule in _rules()})


def _wait_for_scrapes(prometheus: Prometheus, scrapes: int, timeout: float = 20) -> None:
    """Until the server's ``up`` has ``scrapes`` samples of 1."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = prometheus.query("count_over_time(up[1m]) and up == 1")
        if found and float(found[0]["value"][1]) >= scrapes:
            return
        time.sleep(0.25)
    raise AssertionError(f"the server was not scraped {scrapes} times:\n{prometheus.output()}")


def _wait_for_rules(prometheus: Prometheus, names: set[str], timeout: float = 10) -> None:
    """Until Prometheus has evaluated each alert rule of ``names``; each evaluated without error."""
    deadline = time.monotonic() + timeout
    while True:
        rules = [r for g in prometheus.api("rules")["groups"] for r in g["rules"]]
        evaluated = {r["name"]: r for r in rules if not r["lastEvaluation"].startswith("0001")}
        if set(evaluated) == names or time.monotonic() > deadline:
            break
        time.sleep(0.25)
    assert {r["name"] for r in rules} == names
    assert set(evaluated) == names, f"not evaluated: {names - set(evaluated)}"
    failing = {name: rule.get("lastError") for name, rule in evaluated.items() if rule["health"] != "ok"}
    assert not failing, failing
