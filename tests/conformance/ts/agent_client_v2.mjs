// An agent on @modelcontextprotocol/client 2.x: list, call, list_changed, a streamed slow call.
//
// Env: MCP_URL (the bridge's /mcp), MCP_TOKEN (an agent token, sent as a bearer header),
// NEGOTIATION = `auto` (probe server/discover, fall back to initialize), `2026-07-28` (pinned)
// or `legacy` (the SDK's default: the initialize handshake, no probe).
// Prints one JSON report line; tests/conformance/test_ts_sdk.py asserts on it.

import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { fail, finish, installedVersion, listAndCall, recordingWire, signal, slowCall, textsOf, withTimeout } from './wire.mjs';

async function main() {
  const negotiation = process.env.NEGOTIATION;
  const mode = negotiation === 'auto' || negotiation === 'legacy' ? negotiation : { pin: negotiation };
  const wire = recordingWire();
  const client = new Client(
    { name: 'clientmcp-conformance-client-v2', version: '1.0.0' },
    { versionNegotiation: { mode } }
  );
  const listChanged = signal();
  client.setNotificationHandler('notifications/tools/list_changed', () => listChanged.resolve(true));
  const transport = new StreamableHTTPClientTransport(new URL(process.env.MCP_URL), {
    requestInit: { headers: { Authorization: `Bearer ${process.env.MCP_TOKEN}` } },
    fetch: wire.fetch,
  });
  await client.connect(transport);

  const report = {
    sdk: installedVersion('@modelcontextprotocol/client'),
    negotiation,
    protocolVersion: client.getNegotiatedProtocolVersion() ?? null,
    serverInfo: client.getServerVersion() ?? null,
    capabilities: client.getServerCapabilities() ?? null,
    instructions: client.getInstructions() ?? null,
  };

  Object.assign(report, await listAndCall(client));

  // x-mcp-header: the SDK mirrors annotated arguments into Mcp-Param-* headers (base64 where
  // needed) and the bridge validates them against the body before the app sees the call.
  const headerArguments = { region: 'Zürich', priority: 7, verbose: true, query: 'not mirrored' };
  const headers = await client.callTool({ name: 'test_custom_headers', arguments: headerArguments });
  const headerExchange = wire.exchanges.find((x) => x.toolName === 'test_custom_headers');
  report.customHeaders = {
    texts: textsOf(headers),
    isError: headers.isError === true,
    status: headerExchange.status,
    sent: headerExchange.requestHeaders,
  };

  // list_changed arrives on a subscriptions/listen stream (modern) or the GET stream (legacy).
  if (report.protocolVersion === '2026-07-28') {
    const subscription = await client.listen({ toolsListChanged: true });
    report.honoredFilter = subscription.honoredFilter;
    report.trigger = textsOf(await client.callTool({ name: 'test_trigger_tool_change', arguments: {} }));
    report.listChanged = await withTimeout(listChanged.promise, 'notifications/tools/list_changed');
    await subscription.close();
    report.subscriptionClosed = await withTimeout(subscription.closed, 'the subscription to close');
  } else {
    await wire.waitFor((x) => x.method === 'GET' && x.status !== null, 'the legacy GET notification stream');
    report.trigger = textsOf(await client.callTool({ name: 'test_trigger_tool_change', arguments: {} }));
    report.listChanged = await withTimeout(listChanged.promise, 'notifications/tools/list_changed');
  }
  report.toolsAfterChange = (await client.listTools()).tools.map((tool) => tool.name);

  report.slow = await slowCall(client, wire);

  report.rpcMethods = [...new Set(wire.exchanges.map((x) => x.rpcMethod ?? x.method))];
  await client.close();
  finish(report);
}

main().catch(fail);
