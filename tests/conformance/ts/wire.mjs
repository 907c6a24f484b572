// What the TypeScript SDK agents share: a fetch that records the HTTP exchanges it makes, and the report.
//
// The SDKs hide the wire; the tests need to see it (was the slow call answered as SSE, with
// keep-alive comments? did the legacy GET stream open? which Mcp-Param-* headers went out?),
// so every request goes through `wire.fetch`, which notes the request and response heads and,
// for an SSE body, counts its comment lines on a tee of the stream the SDK reads.

import { readFileSync } from 'node:fs';

const TIMEOUT_MS = Number(process.env.AGENT_TIMEOUT_MS ?? 30000);

export function recordingWire() {
  const exchanges = [];
  const waiters = [];

  function settle() {
    for (const waiter of [...waiters]) {
      const found = exchanges.find(waiter.predicate);
      if (found) {
        waiters.splice(waiters.indexOf(waiter), 1);
        waiter.resolve(found);
      }
    }
  }

  // SSE framing (WHATWG): lines end with CRLF, CR or LF; a comment line starts with ':'; an
  // event is dispatched by the blank line after its data lines.
  async function countComments(stream, entry) {
    const decoder = new TextDecoder();
    let pending = '';
    let data = false;
    try {
      for await (const chunk of stream) {
        pending += decoder.decode(chunk, { stream: true });
        // A CR at the end of a read may be the first half of a CRLF: wait for the next read.
        const cut = pending.endsWith('\r') ? pending.length - 1 : pending.length;
        const lines = pending.slice(0, cut).split(/\r\n|\r|\n/);
        pending = lines.pop() + pending.slice(cut);
        for (const line of lines) {
          if (line.startsWith(':')) entry.comments += 1;
          else if (line.startsWith('data:')) data = true;
          else if (line === '' && data) {
            entry.events += 1;
            data = false;
          }
        }
      }
    } catch {
      // The SDK aborted the request (closing a stream): what was counted stands.
    }
    entry.ended = true;
  }

  async function fetchAndRecord(url, init = {}) {
    const headers = new Headers(init.headers ?? {});
    let rpc = null;
    if (typeof init.body === 'string') {
      try {
        rpc = JSON.parse(init.body);
      } catch {
        rpc = null;
      }
    }
    const entry = {
      method: init.method ?? 'GET',
      rpcMethod: rpc?.method ?? null,
      toolName: rpc?.params?.name ?? null,
      requestHeaders: Object.fromEntries(
        [...headers.entries()].filter(([name]) => name.toLowerCase().startsWith('mcp-'))
      ),
      status: null,
      contentType: null,
      comments: 0,
      events: 0,
      ended: false,
    };
    exchanges.push(entry);
    const response = await fetch(url, init);
    entry.status = response.status;
    entry.contentType = response.headers.get('content-type');
    if (response.body && entry.contentType?.startsWith('text/event-stream')) {
      const [mine, theirs] = response.body.tee();
      countComments(mine, entry);
      settle();
      return new Response(theirs, { status: response.status, statusText: response.statusText, headers: response.headers });
    }
    settle();
    return response;
  }

  return {
    exchanges,
    fetch: fetchAndRecord,
    /** Resolves once the SSE body of `entry` has ended, so its counts are final. */
    async ended(entry) {
      await withTimeout(
        (async () => {
          while (!entry.ended) await new Promise((resolve) => setTimeout(resolve, 10));
        })(),
        `the end of the ${entry.rpcMethod ?? entry.method} stream`
      );
      return entry;
    },
    /** Resolves with the first exchange whose response head matches, recorded or still to come. */
    waitFor(predicate, what) {
      const found = exchanges.find(predicate);
      if (found) return Promise.resolve(found);
      return withTimeout(new Promise((resolve) => waiters.push({ predicate, resolve })), what);
    },
  };
}

/** The installed version of an npm package, from the repository's node_modules. */
export function installedVersion(name) {
  const path = new URL(`../../../node_modules/${name}/package.json`, import.meta.url);
  return `${name}@${JSON.parse(readFileSync(path, 'utf8')).version}`;
}

export function withTimeout(promise, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${TIMEOUT_MS} ms waiting for ${what}`)), TIMEOUT_MS);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** A promise and the function that resolves it, for notifications that arrive on their own. */
export function signal() {
  let resolve;
  const promise = new Promise((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

// The tools, and a text, an image, a tool error and an unknown tool's JSON-RPC error.
export async function listAndCall(client) {
  const image = await client.callTool({ name: 'test_image_content', arguments: {} });
  const error = await client.callTool({ name: 'test_error_handling', arguments: {} });
  let unknownTool = null;
  try {
    await client.callTool({ name: 'no_such_tool', arguments: {} });
  } catch (err) {
    unknownTool = { code: err.code, message: err.message };
  }
  return {
    tools: (await client.listTools()).tools.map((tool) => tool.name),
    simpleText: textsOf(await client.callTool({ name: 'test_simple_text', arguments: {} })),
    imageMimeType: image.content[0]?.mimeType ?? null,
    toolError: { isError: error.isError === true, texts: textsOf(error) },
    unknownTool,
  };
}

// A 2.5 s call, which the bridge must answer as an SSE stream: what came back, and how.
export async function slowCall(client, wire) {
  const started = Date.now();
  const slow = await client.callTool({ name: 'test_slow_text', arguments: { seconds: 2.5, text: 'streamed' } });
  const exchange = await wire.ended(wire.exchanges.find((x) => x.toolName === 'test_slow_text'));
  return {
    texts: textsOf(slow),
    elapsedMs: Date.now() - started,
    status: exchange.status,
    contentType: exchange.contentType,
    keepAlives: exchange.comments,
    events: exchange.events,
  };
}

export function textsOf(result) {
  return (result.content ?? []).filter((block) => block.type === 'text').map((block) => block.text);
}

/** Print the report as the last stdout line and exit; pytest asserts on it. */
export function finish(report) {
  process.stdout.write(JSON.stringify(report) + '\n');
  process.exit(0);
}

export function fail(error) {
  process.stdout.write(JSON.stringify({ failed: String(error?.stack ?? error) }) + '\n');
  process.exit(1);
}
