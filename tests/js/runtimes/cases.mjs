// One test file for every runtime the package promises: Node 22, Deno 2, Bun and Chromium
// (sdk/js/README.md, Runtimes). tests/js/test_js_runtimes.py runs it on each, against real
// bridges that control.mjs starts, through the runner of harness.mjs (the web platform only, so
// that a page runs it as Deno and Bun do). Each case is a behaviour of docs/apps.md's table that
// rests on the runtime's WebSocket, timers or AbortSignal; the rest of the table is tested once,
// on Node (tests/js/client.test.mjs). `// row:` names the row of that table a case covers, by its
// JavaScript test: docs/apps.md marks those rows as tested on every runtime.
import { ClientMCP, PING } from "../../../sdk/js/clientmcp.js";
import { RUNTIME, assert, sleep, waitFor } from "./harness.mjs";

const cases = [];
const test = (name, fn) => cases.push([name, fn]);
export default cases;

let ids = 0;
const newId = () => `${RUNTIME}-${Date.now()}-${++ids}`;

let shared = null; // a bridge with the default settings, for every case that needs nothing else
const bridgeOf = async ({ start }) => (shared ??= await start());

/** The runtime's own WebSocket, recording what the client sends and receives. */
class RecordingSocket extends globalThis.WebSocket {
  static all = [];

  constructor(url, protocols) {
    super(url, protocols);
    this.sent = [];
    this.received = [];
    this.addEventListener("message", (event) => this.received.push(event.data));
    RecordingSocket.all.push(this);
  }

  send(data) {
    this.sent.push(data);
    super.send(data);
  }
}

// row: case: connect resolves on registered, and the tools carry their risk
test("connect, register, and a call answered", async (context) => {
  const bridge = await bridgeOf(context);
  const id = newId();
  const mcp = new ClientMCP({ url: bridge.connectUrl, token: await bridge.token("client", id), instructions: "A test app." });
  const states = [];
  mcp.addEventListener("statechange", (event) => states.push(event.state));
  mcp.expose("echo", {
    description: "Echo",
    risk: "observe",
    inputSchema: { type: "object", properties: { text: { type: "string" } } },
    handler: async ({ text }) => ({ echoed: text }),
  });
  await mcp.connect();
  assert.equal(mcp.state, "online");
  assert.deepEqual(states, ["connecting", "online"]);
  const { tools } = await bridge.rpc(id, "tools/list");
  assert.deepEqual(tools, [
    {
      name: "echo",
      description: "Echo",
      inputSchema: { type: "object", properties: { text: { type: "string" } } },
      annotations: { readOnlyHint: true },
      _meta: { "io.github.clientmcp/risk": "observe" },
    },
  ]);
  const init = await bridge.rpc(id, "initialize", { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "t", version: "1" } });
  assert.equal(init.instructions, "A test app.");
  assert.deepEqual(await bridge.call(id, "echo", { text: "héllo" }), {
    content: [{ type: "text", text: '{"echoed":"héllo"}' }],
    structuredContent: { echoed: "héllo" },
  });
  await mcp.close();
  assert.equal(mcp.state, "offline");
  assert.equal(mcp.closeCode, 1000);
});

// row: case: a cancel reaches the handler's signal
test("a cancel aborts the handler's signal", async (context) => {
  const bridge = await bridgeOf(context);
  const id = newId();
  const mcp = new ClientMCP({ url: bridge.connectUrl, token: await bridge.token("client", id) });
  let started;
  const running = new Promise((resolve) => (started = resolve));
  let reason = null;
  mcp.expose("wait", {
    handler: (args, { signal }) =>
      new Promise((resolve) => {
        signal.addEventListener("abort", () => {
          reason = signal.reason;
          resolve("too late");
        });
        started();
      }),
  });
  await mcp.connect();
  const agent = new AbortController();
  const call = bridge.call(id, "wait", {}, { signal: agent.signal }).catch((error) => error.name);
  await running;
  agent.abort(); // the agent hangs up: the bridge sends cancel (docs/protocol.md)
  assert.equal(await call, "AbortError");
  await waitFor(() => reason !== null, 5000, "the signal aborted");
  assert.equal(reason.message, "the call was cancelled");
  assert.equal(mcp.callsCancelled, 1);
  await mcp.close();
});

// row: case: a result over 4 MiB becomes a tool error saying so
test("a result over 4 MiB becomes a tool error", async (context) => {
  const bridge = await bridgeOf(context);
  const id = newId();
  const mcp = new ClientMCP({ url: bridge.connectUrl, token: await bridge.token("client", id) });
  mcp.expose("huge", { handler: () => "x".repeat(4 * 1024 * 1024) });
  mcp.expose("wide", { handler: () => "é".repeat(2 * 1024 * 1024) }); // 2 Mi characters, 4 MiB of UTF-8
  await mcp.connect();
  for (const name of ["huge", "wide"]) {
    assert.deepEqual(
      await bridge.call(id, name),
      { content: [{ type: "text", text: "The result is too large to deliver (over 4 MiB)." }], isError: true },
      name,
    );
  }
  assert.equal(mcp.state, "online"); // the connection survived it
  await mcp.close();
});

// row: case: an idle app pings and stays connected
test("the exact ping after idle keeps the app connected", async ({ start }) => {
  const own = await start("--app-idle-timeout", "0.6s");
  const id = newId();
  RecordingSocket.all = [];
  const mcp = new ClientMCP({ url: own.connectUrl, token: await own.token("client", id), pingInterval: 200, reconnect: false, WebSocket: RecordingSocket });
  mcp.expose("echo", { handler: () => "ok" });
  await mcp.connect();
  await sleep(1800); // three of the bridge's idle timeouts
  assert.equal(mcp.state, "online");
  assert.equal(mcp.closeCode, null);
  const [socket] = RecordingSocket.all;
  assert.equal(RecordingSocket.all.length, 1);
  assert.equal(socket.sent[0], mcp.registerMessage());
  const pings = socket.sent.slice(1);
  assert.ok(pings.length >= 6, `${pings.length} pings`);
  assert.deepEqual([...new Set(pings)], ['{"type":"ping"}']); // exactly this text (ClientMCP v1 §3.2)
  assert.equal(PING, '{"type":"ping"}');
  assert.ok(socket.received.filter((text) => text === '{"type":"pong"}').length >= 6);
  await mcp.close();
  await own.stop();
});

// row: case: it reconnects and re-registers after a bridge restart
test("after the bridge restarts, it reconnects with the backoff and a fresh token", async ({ start }) => {
  const own = await start();
  const id = newId();
  let tokens = 0;
  // Real timers, with each wait the client asks for while offline written down: its backoff.
  const waits = [];
  let mcp;
  const clock = {
    now: () => performance.now(),
    setTimeout: (fn, ms) => {
      if (mcp?.state === "offline") waits.push(ms);
      return setTimeout(fn, ms);
    },
    clearTimeout: (timer) => clearTimeout(timer),
  };
  mcp = new ClientMCP({
    url: own.connectUrl,
    token: async () => {
      tokens += 1;
      return own.token("client", id);
    },
    backoff: [50, 200],
    random: () => 0.5, // no jitter: each wait is the backoff's own
    clock,
  });
  mcp.expose("echo", { handler: () => "ok" });
  const codes = [];
  mcp.addEventListener("statechange", (event) => event.state === "offline" && codes.push(event.code));
  await mcp.connect();
  waits.length = 0; // connect()'s own timeout was asked for while offline too
  await own.restart();
  await waitFor(() => mcp.state === "online" && codes.length > 0, 10000, "online again");
  assert.equal(codes[0], 1001); // the bridge shutting down (docs/protocol.md, Close codes)
  // One wait per failed attempt while the bridge was down, doubling up to the cap.
  assert.ok(waits.length >= 1 && waits.length === mcp.attempts - 1, `${waits} after ${mcp.attempts} attempts`);
  assert.deepEqual(waits, waits.map((_, index) => Math.min(50 * 2 ** index, 200)));
  assert.deepEqual(await own.toolNames(id), ["echo"]); // registered again
  assert.equal(tokens, mcp.attempts); // the token function: once per connection attempt
  await mcp.close();
  await own.stop();
});

// row: case: a replaced app does not reconnect
test("replaced by a newer connection (4409), it never reconnects", async (context) => {
  const bridge = await bridgeOf(context);
  const id = newId();
  const token = await bridge.token("client", id);
  const older = new ClientMCP({ url: bridge.connectUrl, token, backoff: [10, 20] });
  older.expose("echo", { handler: () => "older" });
  const states = [];
  older.addEventListener("statechange", (event) => states.push([event.state, event.code]));
  await older.connect();
  const newer = new ClientMCP({ url: bridge.connectUrl, token });
  newer.expose("echo", { handler: () => "newer" });
  await newer.connect();
  await waitFor(() => older.state === "replaced", 5000, "the older one replaced");
  assert.equal(older.closeCode, 4409);
  assert.deepEqual(states.at(-1), ["replaced", 4409]);
  await sleep(200); // ten times the backoff: a reconnect would have replaced the newer one
  assert.equal(older.attempts, 1);
  assert.equal(newer.state, "online");
  assert.equal((await bridge.call(id, "echo")).content[0].text, "newer");
  await newer.close();
});

// row: case: a token function is called once per connection, and again after 4401
test("a token function is called for every connection, and again after 4401", async (context) => {
  const bridge = await bridgeOf(context);
  const id = newId();
  // An agent's token first, which the bridge refuses to an app (4401); then client tokens.
  const given = [await bridge.token("agent", id), await bridge.token("client", id)];
  let calls = 0;
  const mcp = new ClientMCP({ url: bridge.connectUrl, token: () => given[calls++], backoff: [10, 20] });
  const codes = [];
  mcp.addEventListener("statechange", (event) => event.state === "offline" && codes.push(event.code));
  mcp.expose("echo", { handler: () => "ok" });
  await mcp.connect();
  assert.deepEqual(codes, [4401]);
  assert.equal(calls, 2);
  assert.equal(mcp.attempts, 2);
  assert.equal((await bridge.call(id, "echo")).content[0].text, "ok");
  await mcp.close();
});
