"""ServerConfig: everything the server is started with, frozen."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..adapter import DEFAULT_RENDER_CACHE_BYTES
from ..request import DEFAULT_REPLAY_PREFIX_BYTES
from ..responses import AdmissionLimits, BackgroundLimits, SamplingDefaults, SubagentLimits
from ..tenants import TenantDirectory
from ..tools import ToolSettings
from .http_limits import HTTPLimits

__all__ = ["MAX_SERVE_FRONTENDS", "ServerConfig"]


#: The most frontends one ``serve`` starts (``--num_serve_frontends``).
MAX_SERVE_FRONTENDS = 64


@dataclass(frozen=True, slots=True)
class ServerConfig:
    """Settings of one server process (from CLI flags)."""

    host: str = "127.0.0.1"
    port: int = 8000
    served_model_name: str = "gpt-oss"
    max_stored_responses: int = 10_000
    max_store_bytes: int = 2 << 30
    log_level: str = "info"
    #: Where OpenTelemetry traces go (``--otlp_traces_endpoint``; docs/tracing-and-dashboards.md); None: the
    #: OTEL_* environment decides (off unless it names an endpoint).
    otlp_traces_endpoint: str | None = None
    #: ``text`` or ``json`` (``--log_format``; docs/tracing-and-dashboards.md#json-logs): render workers log so too.
    log_format: str = "text"
    store: str = "memory"  # memory | sqlite:///PATH | redis://HOST:PORT/DB
    store_ttl: int = 0  # Redis: seconds an entry lives after its last use (0: until Redis evicts it)
    api_key: str | None = None  # Bearer key required on /v1/* (None: open)
    #: The tenants file (``--tenants``; docs/tenants.md#the-tenants-file): keys, limits; exclusive with api_key.
    tenants_file: str | None = None
    shutdown_timeout: float = 30.0  # SIGTERM: seconds running responses get to finish
    #: Seconds a finished background response's events stay replayable (BackgroundLimits' own default).
    background_grace: float = BackgroundLimits().grace
    #: Key for encrypted reasoning and compaction (else $TRTLLM_RESPONSES_ENCRYPTION_KEY, else the cache's).
    encryption_key_file: str | None = None
    #: Reasoning items carry only ``encrypted_content``; no reasoning text is streamed.
    redact_reasoning: bool = False
    #: ``model``: reasoning.summary is answered with summaries the model writes; ``off``: ``summary: []``.
    reasoning_summaries: str = "model"
    #: A WebSocket connection is closed after this long (``websocket_connection_limit_reached``).
    websocket_max_seconds: float = 3600.0
    #: Largest request body taken before tokenizing (400 context_length_exceeded); 0: sized to the window.
    max_input_bytes: int = 0
    #: Folder of prompt templates (``DIR/<id>/<version>.json``) for the request field ``prompt``; None: none.
    prompts: str | None = None
    #: Start the render worker processes with the server (else at the first large request).
    start_render_worker: bool = True
    #: Render worker processes (``--render_workers``); 0: one a core, at most 4.
    render_workers: int = 0
    #: Serving frontend processes on one port (``--num_serve_frontends``), at most MAX_SERVE_FRONTENDS.
    num_serve_frontends: int = 1
    #: This process's place in its group of frontends (0: the launcher, or a server alone); in ``/health``.
    frontend_index: int = 0
    #: The folder of this server's group of frontends (``--num_serve_frontends``), set by ``serve``: its
    #: Prometheus multiprocess files (``metrics/``), each frontend's Unix socket; None: a server alone.
    group_dir: str | None = None
    #: Bytes of rendered input items kept for replayed histories (``--render_cache_bytes``); 0: none.
    render_cache_bytes: int = DEFAULT_RENDER_CACHE_BYTES
    #: Bytes of large bodies' prefixes kept, so a replay parses only its new bytes (``--replay_prefix_bytes``);
    #: 0: none.
    replay_prefix_bytes: int = DEFAULT_REPLAY_PREFIX_BYTES
    #: Model names ``/v1/messages`` answers to, as glob patterns: each means the served model (Claude Code
    #: asks for ``claude-…`` names); ``*``, the default, takes any name. Another is a 404 ``not_found_error``.
    model_aliases: tuple[str, ...] = ("*",)
    #: Per-connection HTTP limits (head and body deadlines, head size, connection cap).
    http: HTTPLimits = field(default_factory=HTTPLimits)
    tools: ToolSettings = field(default_factory=ToolSettings)
    #: Budgets of the beta multi-agent surface's sub-agents
    #: (docs/agent-clients.md#multi-agent-responses-beta).
    subagents: SubagentLimits = field(default_factory=SubagentLimits)
    #: How full the engine gets, how long and how many turns wait, the rate window
    #: (``--max_running_responses`` …; docs/tenants.md#fair-share).
    admission: AdmissionLimits = field(default_factory=AdmissionLimits)
    #: What a request that does not say is sampled with (``--temperature``, ``--top_p`` …).
    sampling: SamplingDefaults = field(
        default_factory=SamplingDefaults
    )  # server-run tools' allow-lists and limits

    def tenant_directory(self) -> TenantDirectory:
        """The tenants this configuration serves (``--tenants``, else ``--api_key``, else open); a fresh
        directory (the app keeps one and reloads it on SIGHUP); TenantFileError for a file that does not read."""
        return TenantDirectory.configured(self.api_key, self.tenants_file)
