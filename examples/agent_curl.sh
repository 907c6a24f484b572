#!/bin/sh
# An agent with curl alone: initialize, tools/list and tools/call over MCP Streamable HTTP.
# Run it while `make demo` runs, with the agent token the demo printed:
#   export CLIENTMCP_AGENT_TOKEN=...
#   sh examples/agent_curl.sh
# CLIENTMCP_AGENT_URL names another bridge than http://127.0.0.1:8080/mcp.
set -eu
url=${CLIENTMCP_AGENT_URL:-http://127.0.0.1:8080/mcp}
headers=$(mktemp)
trap 'rm -f "$headers"' EXIT

mcp() {  # one JSON-RPC message; prints the answer
    curl -sS --fail-with-body "$url" -H "Authorization: Bearer $CLIENTMCP_AGENT_TOKEN" \
        -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' "$@"
    echo
}

mcp -D "$headers" -d '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{
    "protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"curl","version":"1"}}}'
session=$(awk 'tolower($1) == "mcp-session-id:" { print $2 }' "$headers" | tr -d '\r')
set -- -H "Mcp-Session-Id: $session" -H 'MCP-Protocol-Version: 2025-11-25'

mcp "$@" -d '{"jsonrpc":"2.0","method":"notifications/initialized"}'
mcp "$@" -d '{"jsonrpc":"2.0","id":2,"method":"tools/list"}'
mcp "$@" -d '{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{
    "name":"add_todo","arguments":{"title":"Buy milk"}}}'
