"""The MCP revisions `/mcp` serves, by era, and the server its answers say it is (docs/protocol.md)."""

from __future__ import annotations

from clientmcp_fast import __version__
from clientmcp_fast.core.jsonrpc import encode_json

MODERN = "2026-07-28"
LEGACY = ("2025-11-25", "2025-06-18", "2025-03-26")
LATEST_LEGACY = "2025-11-25"
UNNAMED_LEGACY = "2025-03-26"  # a request that names no revision (MCP 2025-06-18, basic/transports)
# server/discover's supportedVersions and -32022's `supported` are this one list (docs/protocol.md).
SUPPORTED = (MODERN, *LEGACY)

SERVER_INFO = {"name": "clientmcp", "version": __version__}
_SERVER_INFO_META = b'"_meta":{"io.modelcontextprotocol/serverInfo":' + encode_json(SERVER_INFO) + b"}"
# How a modern tools/list or server/discover result ends: cache hints, then serverInfo.
MODERN_LIST_TAIL = b',"ttlMs":0,"cacheScope":"private",' + _SERVER_INFO_META + b"}"
