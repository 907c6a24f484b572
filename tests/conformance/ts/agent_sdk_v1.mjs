// An agent on @modelcontextprotocol/sdk 1.32 (legacy era only): list, call, list_changed, a streamed slow call.
//
// Env: MCP_URL (the bridge's /mcp), MCP_TOKEN (an agent token, sent as a bearer header).
// Prints one JSON report line; tests/conformance/test_ts_sdk.py asserts on it.

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { fail, finish, installedVersion, listAndCall, recordingWire, signal, slowCall, textsOf, withTimeout } from './wire.mjs';

async function main() {
  const wire = recordingWire();
  const client = new Client({ name: 'clientmcp-conformance-sdk-v1', version: '1.0.0' });
  const listChanged = signal();
  client.setNotificationHandler(ToolListChangedNotificationSchema, () => listChanged.resolve(true));
  const transport = new StreamableHTTPClientTransport(new URL(process.env.MCP_URL), {
    requestInit: { headers: { Authorization: `Bearer ${process.env.MCP_TOKEN}` } },
    fetch: wire.fetch,
  });
  await client.connect(transport);

  const report = {
    sdk: installedVersion('@modelcontextprotocol/sdk'),
    protocolVersion: transport.protocolVersion,
    sessionId: transport.sessionId ?? null,
    serverInfo: client.getServerVersion(),
    capabilities: client.getServerCapabilities(),
    instructions: client.getInstructions() ?? null,
  };

  Object.assign(report, await listAndCall(client));

  // list_changed arrives on the GET stream, which the SDK opens after `initialized`:
  // wait until the bridge answered it, then change the tool set through the app.
  const stream = await wire.waitFor(
    (x) => x.method === 'GET' && x.status !== null,
    'the legacy GET notification stream'
  );
  report.getStream = { status: stream.status, contentType: stream.contentType };
  report.trigger = textsOf(await client.callTool({ name: 'test_trigger_tool_change', arguments: {} }));
  report.listChanged = await withTimeout(listChanged.promise, 'notifications/tools/list_changed');
  report.toolsAfterChange = (await client.listTools()).tools.map((tool) => tool.name);

  report.slow = await slowCall(client, wire);

  await client.close();
  finish(report);
}

main().catch(fail);
