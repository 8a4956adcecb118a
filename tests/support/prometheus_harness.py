"""A real Prometheus (Debian's package; ``make prometheus`` installs it) scraping a test server on loopback.

It runs ``examples/prometheus/prometheus.yml`` as it is, with the target, the intervals and the rule file's
path replaced: its data, config and rules in a temp folder it owns, on a free port, stopped by the test.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import httpx
import yaml

from support.paths import ROOT
from support.process_harness import wait_answering
from support.redis_harness import free_port

__all__ = ["ALERTS", "CONFIG", "Prometheus", "prometheus_binary", "promtool_binary"]

CONFIG = ROOT / "examples" / "prometheus" / "prometheus.yml"
ALERTS = ROOT / "examples" / "prometheus" / "alerts.yml"


def prometheus_binary() -> str | None:
    """The prometheus executable, or None."""
    return shutil.which("prometheus") or (
        "/usr/bin/prometheus" if Path("/usr/bin/prometheus").exists() else None
    )


def promtool_binary() -> str | None:
    """The promtool executable (in Debian's prometheus package), or None."""
    return shutil.which("promtool") or ("/usr/bin/promtool" if Path("/usr/bin/promtool").exists() else None)


def config_for(target: str, interval: str) -> dict[str, Any]:
    """The example's configuration with its one job scraping ``target`` every ``interval`` and the rules
    evaluated as often, the alert rules beside it in the temp folder."""
    config: dict[str, Any] = yaml.safe_load(CONFIG.read_text())
    config["global"].update(scrape_interval=interval, evaluation_interval=interval)
    (job,) = config["scrape_configs"]
    (static,) = job["static_configs"]
    static["targets"] = [target]
    assert config["rule_files"] == [ALERTS.name], "the example loads the alert rules beside it"
    return config


class Prometheus:
    """One Prometheus on 127.0.0.1 scraping ``target`` (``host:port``) every ``interval``."""

    def __init__(self, target: str, interval: str = "1s") -> None:
        binary = prometheus_binary()
        if binary is None:
            raise RuntimeError("prometheus is not installed (make test installs Debian's with apt-get)")
        self.dir = Path(tempfile.mkdtemp(prefix="prometheus-test-"))
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        shutil.copy(ALERTS, self.dir / ALERTS.name)
        (self.dir / "prometheus.yml").write_text(yaml.safe_dump(config_for(target, interval)))
        self.log = (self.dir / "prometheus.log").open("wb")
        self.process = subprocess.Popen(
            [
                binary,
                f"--config.file={self.dir / 'prometheus.yml'}",
                f"--storage.tsdb.path={self.dir / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--web.enable-lifecycle",
                "--log.level=warn",
            ],
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )

    def wait_ready(self, timeout: float = 30) -> None:
        """Return once the HTTP API answers; raise with its log if it exits or never does."""
        wait_answering(
            self.process, self.url + "/-/ready", self.output, timeout=timeout, name="prometheus", interval=0.1
        )

    def api(self, path: str, **params: str) -> Any:
        """``GET /api/v1/<path>``'s ``data``; AssertionError naming Prometheus's error if it failed."""
        answer = httpx.get(f"{self.url}/api/v1/{path}", params=params, timeout=10).json()
        assert answer["status"] == "success", (
            f"{path} {params}: {answer.get('errorType')}: {answer.get('error')}"
        )
        return answer["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        """The instant vector ``expr`` evaluates to now."""
        data = self.api("query", query=expr)
        assert data["resultType"] in ("vector", "scalar"), data
        return data["result"] if data["resultType"] == "vector" else [{"value": data["result"]}]

    def query_range(self, expr: str, start: float, end: float, step: str) -> list[dict[str, Any]]:
        """The range ``expr`` evaluates to from ``start`` to ``end`` (Unix seconds)."""
        data = self.api("query_range", query=expr, start=str(start), end=str(end), step=step)
        return data["result"]  # type: ignore[no-any-return]

    def output(self) -> str:
        self.log.flush()
        return (self.dir / "prometheus.log").read_text(errors="replace")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> Prometheus:
        self.wait_ready()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
