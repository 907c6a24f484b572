-- A legacy (MCP 2025-11-25) tools/call to the app's echo tool, with a session from initialize.
-- Environment: BENCH_TOKEN, BENCH_SESSION (the Mcp-Session-Id), BENCH_WRK_DIR; see common.lua.
local common = dofile(os.getenv("BENCH_WRK_DIR") .. "/common.lua")

common.request(
  '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}',
  {["MCP-Protocol-Version"] = "2025-11-25", ["Mcp-Session-Id"] = os.getenv("BENCH_SESSION") or ""})
