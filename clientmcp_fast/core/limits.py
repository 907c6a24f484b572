"""The bridge's limits (docs/configuration.md, Settings): the fixed 4 MiB message size, and the tunable rest."""

from __future__ import annotations

from dataclasses import dataclass

MiB = 1024 * 1024

# ClientMCP v1 §3.2 and §6 fix this on every bridge, so that an app can check a result before
# sending it: a constant, never a setting.
MAX_MESSAGE_BYTES = 4 * MiB

# A 2025-03-26 batch is served element by element within one turn of the loop: the protocol is
# silent, and a 4 MiB body of `{}` elements stalled the whole bridge for seconds. A thousand,
# as many as one app may have calls in flight, keeps the turn short.
MAX_BATCH_ELEMENTS = 1_000

# RFC 6455 §5.5: a control frame carries at most 125 bytes, 2 of them the close code.
MAX_CLOSE_REASON_BYTES = 123


@dataclass(frozen=True, slots=True)
class Limits:
    """Every bound of docs/configuration.md, Settings, that an operator may change, with its default."""

    max_head_bytes: int = 16 * 1024
    max_pipelined: int = 16
    max_agent_connections: int = 10_000
    max_tools: int = 1_000
    max_calls_per_app: int = 1_000
    app_soft_bytes: int = 16 * MiB
    app_hard_bytes: int = 64 * MiB
    app_soft_seconds: float = 30.0
    max_streams_per_client: int = 64
    max_streams: int = 10_000
    # Per agent token (docs/configuration.md, Agent limits); 0 turns either off. A token's rate
    # bucket holds one second of requests, so a burst of `agent_rate` at once is served.
    agent_rate: float = 1_000.0
    agent_max_calls: int = 100
    # 0 means "the open-file limit less 10 % for agents", worked out when the server starts.
    max_app_connections: int = 0
    # With --nats: apps held by other instances whose tool sets this instance keeps (docs/scaling.md).
    max_remote_apps: int = 100_000
    head_timeout: float = 10.0
    keepalive_timeout: float = 75.0
    app_idle_timeout: float = 90.0
    call_timeout: float = 120.0
