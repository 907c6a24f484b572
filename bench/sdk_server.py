"""Figure 5's peer: the official `mcp` SDK's own Streamable HTTP server with one local `echo` tool.

This is what a Python user would otherwise pick: `mcp.server.MCPServer` served by
uvicorn (uvloop + httptools, no access log), stateless, answering JSON rather than SSE,
so that it does the least work the SDK allows for the same tools/call the bridge
forwards. `python -m bench.sdk_server --port P`; the bench pins it to the bridge's core.
"""

from __future__ import annotations

import argparse

import uvicorn
from mcp.server import MCPServer


def build_app():
    """The SDK's Starlette app serving `/mcp`, with `echo(text) -> text`."""
    server = MCPServer("bench-echo")

    @server.tool()
    async def echo(text: str) -> str:
        """Returns its text."""
        return text

    return server.streamable_http_app(stateless_http=True, json_response=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    flags = parser.parse_args()
    uvicorn.run(
        build_app(),
        host=flags.host,
        port=flags.port,
        loop="uvloop",
        http="httptools",
        log_level="warning",
        access_log=False,
        backlog=4096,
    )
