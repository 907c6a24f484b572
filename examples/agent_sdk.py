"""An agent on the official `mcp` Python SDK: lists an app's tools through the bridge and calls one.

Run it while `make demo` runs, with the agent token the demo printed:

export CLIENTMCP_AGENT_TOKEN=...
python examples/agent_sdk.py

CLIENTMCP_AGENT_URL names another bridge than http://127.0.0.1:8080/mcp.
"""

import asyncio
import os

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client


async def main():
    url = os.environ.get("CLIENTMCP_AGENT_URL", "http://127.0.0.1:8080/mcp")
    headers = {"Authorization": f"Bearer {os.environ['CLIENTMCP_AGENT_TOKEN']}"}
    async with (
        httpx2.AsyncClient(headers=headers) as http,
        Client(streamable_http_client(url, http_client=http)) as agent,
    ):
        listed = await agent.list_tools()
        print("tools:", ", ".join(tool.name for tool in listed.tools))
        result = await agent.call_tool("add_todo", {"title": "Buy milk"})
        print("add_todo:", result.content[0].text, result.structured_content)


asyncio.run(main())
