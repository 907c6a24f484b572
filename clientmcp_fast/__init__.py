"""clientmcp_fast: the ClientMCP bridge in Python, live applications exposed as MCP servers."""

__version__ = "0.1.0"
