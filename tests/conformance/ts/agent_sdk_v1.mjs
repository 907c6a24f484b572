// An agent on @modelcontextprotocol/sdk 1.32 (legacy era only): list, call, list_changed, a streamed slow call.
//
// Env: MCP_URL (the bridge's /mcp), MCP_TOKEN (an agent token, sent as a bearer header).
// Prints one JSON report line; tests/conformance/test_ts_sdk.py asserts on it.

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { fail, finish, installedVersion, recordingWire, signal, slowCall, textsOf, withTimeout } from './wire.mjs';

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

  report.tools = (await client.listTools()).tools.map((tool) => tool.name);
  report.simpleText = textsOf(await client.callTool({ name: 'test_simple_text', arguments: {} }));
  const image = await client.callTool({ name: 'test_image_content', arguments: {} });
  report.imageMimeType = image.content[0]?.mimeType ?? null;
  const error = await client.callTool({ name: 'test_error_handling', arguments: {} });
  report.toolError = { isError: error.isError === true, texts: textsOf(error) };
  try {
    await client.callTool({ name: 'no_such_tool', arguments: {} });
    report.unknownTool = null;
  } catch (err) {
    report.unknownTool = { code: err.code, message: err.message };
  }

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
