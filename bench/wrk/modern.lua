-- A stateless MCP 2026-07-28 tools/call to the app's echo tool: routing headers plus params._meta.
-- Environment: BENCH_TOKEN, BENCH_WRK_DIR; see common.lua.
local common = dofile(os.getenv("BENCH_WRK_DIR") .. "/common.lua")

common.request(
  '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"},' ..
  '"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",' ..
  '"io.modelcontextprotocol/clientCapabilities":{}}}}',
  {["MCP-Protocol-Version"] = "2026-07-28", ["Mcp-Method"] = "tools/call", ["Mcp-Name"] = "echo"})
