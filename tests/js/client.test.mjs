// The JavaScript client (sdk/js/clientmcp.js) against a real bridge: the behaviour
// table of docs/apps.md, case by case. Each test named "case: ..." is one row of that table,
// tested under the same name for clientmcp_fast.client (tests/e2e/test_app_behaviour.py).
// Run by tests/js/test_js_client.py with Node 22 (`node --test`).
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";

import * as api from "@opentelemetry/api";
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";

import {
  ClientMCP,
  PING,
  accepted,
  asResult,
  completed,
  noReconnectReason,
  rejected,
} from "../../sdk/js/clientmcp.js";
import { Bridge, FakeClock, RecordingSocket, freePort, sseMessages, waitFor } from "./bridge.mjs";

let bridge;
before(async () => {
  bridge = await Bridge.start();
});
after(async () => {
  await bridge.stop();
});

let ids = 0;
const newId = () => `js-${process.pid}-${++ids}`;

function app(id, options = {}) {
  const mcp = new ClientMCP({ url: bridge.connectUrl, token: bridge.token("client", id), ...options });
  mcp.expose("echo", { handler: (args) => args.text ?? "ok", inputSchema: { type: "object", properties: { text: { type: "string" } } } });
  return mcp;
}

test("case: connect resolves on registered, and the tools carry their risk", async () => {
  const id = newId();
  const mcp = new ClientMCP({ url: bridge.connectUrl, token: bridge.token("client", id), instructions: "A test app." });
  const states = [];
  mcp.addEventListener("statechange", (event) => states.push(event.state));
  mcp.expose("look", { description: "Look", risk: "observe", handler: () => "seen" });
  mcp.expose("pay", { description: "Pay", risk: "transact", title: "Pay now", annotations: { openWorldHint: false }, handler: () => "paid" });
  await mcp.connect();
  assert.equal(mcp.state, "online");
  assert.deepEqual(states, ["connecting", "online"]);
  const { tools } = await bridge.rpc(id, "tools/list");
  assert.deepEqual(tools, [
    { name: "look", description: "Look", inputSchema: { type: "object" }, annotations: { readOnlyHint: true }, _meta: { "io.github.clientmcp/risk": "observe" } },
    {
      name: "pay",
      description: "Pay",
      inputSchema: { type: "object" },
      annotations: { destructiveHint: true, idempotentHint: false, openWorldHint: false },
      _meta: { "io.github.clientmcp/risk": "transact" },
      title: "Pay now",
    },
  ]);
  const init = await bridge.rpc(id, "initialize", { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "t", version: "1" } });
  assert.equal(init.instructions, "A test app.");
  assert.throws(() => mcp.expose("x", { risk: "huge", handler: () => 1 }), /risk must be one of observe, operate, manage, transact/);
  await mcp.close();
  assert.equal(mcp.state, "offline");
  assert.equal(mcp.closeCode, 1000);
});

test("case: a change re-registers the whole set", async () => {
  const id = newId();
  const mcp = app(id);
  await mcp.connect();
  mcp.expose("second", { handler: () => "2" });
  await waitFor(async () => (await bridge.toolNames(id)).join() === "echo,second", 5000, "the new set");
  mcp.unexpose("echo");
  await waitFor(async () => (await bridge.toolNames(id)).join() === "second", 5000, "the smaller set");
  await mcp.close();
});

test("case: onAuthorize answers authorize with consent", async () => {
  // A bridge with OAuth on: the test plays the OAuth client and its person on the consent page.
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const oauth = new Bridge(port, ["--oauth", "on", "--public-url", base]);
  await oauth.run();
  try {
    const id = newId();
    const asked = [];
    const answers = [true, false];
    const mcp = new ClientMCP({ url: oauth.connectUrl, token: oauth.token("client", id), onAuthorize: async (request) => {
      asked.push(request);
      return answers.shift();
    } });
    mcp.expose("echo", { handler: () => "ok" });
    assert.equal(JSON.parse(mcp.registerMessage()).consent, true);
    await mcp.connect();
    const redirect = "http://127.0.0.1:33418/callback";
    const registered = await (await fetch(`${base}/oauth/register`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ redirect_uris: [redirect], client_name: "JS host" }),
    })).json();
    const query = new URLSearchParams({
      response_type: "code",
      client_id: registered.client_id,
      redirect_uri: redirect,
      state: "s",
      code_challenge: "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM",
      code_challenge_method: "S256",
      resource: `${base}/apps/${id}/mcp`,
    });
    const consent = async () => {
      const page = await fetch(`${base}/oauth/authorize?${query}`);
      assert.equal(page.status, 200);
      const cookie = page.headers.get("set-cookie").split(";")[0];
      const text = await page.text();
      const field = (name) => text.match(new RegExp(`name="${name}" value="([^"]*)"`))[1];
      const count = asked.length;
      await waitFor(() => asked.length > count, 5000, "the authorize");
      const request = asked.at(-1);
      assert.equal(request.clientName, "JS host");
      assert.equal(request.clientOrigin, "http://127.0.0.1:33418");
      assert.match(request.code, /^[A-HJKMNP-Z2-9]{8}$/);
      await sleep(200); // the consent on its way
      const form = new URLSearchParams({ request: field("request"), csrf: field("csrf"), code: request.code });
      const answer = await fetch(`${base}/oauth/authorize`, { method: "POST", body: form, redirect: "manual", headers: { cookie, origin: base } });
      assert.equal(answer.status, 303);
      return new URL(answer.headers.get("location")).searchParams;
    };
    const allowed = await consent();
    assert.ok(allowed.get("code") && allowed.get("iss") === base);
    const denied = await consent();
    assert.equal(denied.get("error"), "access_denied");
    // Cleared while online: registered again without consent, and a page then says the app cannot be asked.
    mcp.onAuthorize = null;
    assert.equal(JSON.parse(mcp.registerMessage()).consent, undefined);
    await waitFor(async () => (await fetch(`${base}/oauth/authorize?${query}`)).status === 403, 5000, "the register without consent");
    await mcp.close();
  } finally {
    await oauth.stop();
  }
});

test("case: a refused register rejects connect with 4400 and its reason", async () => {
  const id = newId();
  const mcp = new ClientMCP({ url: bridge.connectUrl, token: bridge.token("client", id) });
  mcp.expose("a b", { handler: () => "" });
  await assert.rejects(mcp.connect(), (error) => {
    assert.equal(error.code, 4400);
    assert.match(error.reason, /^tools\[0\] "a b": /);
    assert.match(error.message, /closed with 4400 \(a protocol error\): tools\[0\]/);
    return true;
  });
  assert.equal(mcp.state, "offline");
  assert.equal(mcp.attempts, 1); // never again: the bridge would refuse it again
});

test("case: a refused token rejects connect with 4401 and is not retried", async () => {
  const id = newId();
  const mcp = new ClientMCP({ url: bridge.connectUrl, token: bridge.token("agent", id), backoff: [10, 20] });
  await assert.rejects(mcp.connect(), (error) => error.code === 4401 && /the token was refused/.test(error.message));
  await sleep(100); // five times the backoff: a retry would have happened
  assert.equal(mcp.attempts, 1);
});

test("case: a token function is called once per connection, and again after 4401", async () => {
  const id = newId();
  const given = [bridge.token("agent", id), bridge.token("client", id), bridge.token("client", id)];
  let calls = 0;
  const mcp = new ClientMCP({ url: bridge.connectUrl, token: async () => given[calls++], backoff: [10, 20] });
  mcp.expose("echo", { handler: () => "ok" });
  await mcp.connect(); // refused with 4401 first, then a fresh token
  assert.equal(calls, 2);
  assert.equal(mcp.attempts, 2);
  assert.equal((await bridge.call(id, "echo")).content[0].text, "ok");
  assert.equal(calls, 2);
  await mcp.close();
});

test("case: a replaced app does not reconnect", async () => {
  const id = newId();
  const older = app(id, { backoff: [10, 20] });
  const states = [];
  older.addEventListener("statechange", (event) => states.push([event.state, event.code]));
  await older.connect();
  const newer = app(id);
  await newer.connect();
  await waitFor(() => older.state === "replaced", 5000, "the older one replaced");
  assert.equal(older.closeCode, 4409);
  assert.deepEqual(states.at(-1), ["replaced", 4409]);
  await sleep(200); // ten times the backoff: a reconnect would have replaced the newer one
  assert.equal(older.attempts, 1);
  assert.equal(newer.state, "online");
  await newer.close();
});

test("case: results are converted", async () => {
  const id = newId();
  const mcp = new ClientMCP({ url: bridge.connectUrl, token: bridge.token("client", id) });
  const returns = {
    text: () => "plain",
    full: () => ({ content: [{ type: "text", text: "as is" }], _meta: { k: 1 } }),
    object: () => ({ count: 2 }),
    list: () => [1, 2],
    nothing: () => undefined,
    thrown: () => {
      throw new RangeError("too far");
    },
    asynchronous: async () => "later",
  };
  for (const [name, handler] of Object.entries(returns)) mcp.expose(name, { handler });
  await mcp.connect();
  const result = async (name) => bridge.call(id, name);
  assert.deepEqual(await result("text"), { content: [{ type: "text", text: "plain" }] });
  assert.deepEqual(await result("full"), { content: [{ type: "text", text: "as is" }], _meta: { k: 1 } });
  assert.deepEqual(await result("object"), { content: [{ type: "text", text: '{"count":2}' }], structuredContent: { count: 2 } });
  assert.deepEqual(await result("list"), { content: [{ type: "text", text: "[1,2]" }] });
  assert.deepEqual(await result("nothing"), { content: [{ type: "text", text: "Done." }] });
  assert.deepEqual(await result("thrown"), { content: [{ type: "text", text: "RangeError: too far" }], isError: true });
  assert.deepEqual(await result("asynchronous"), { content: [{ type: "text", text: "later" }] });
  await mcp.close();
});

test("case: outcomes say how the call ended", () => {
  assert.deepEqual(completed("Saved eggs", { name: "eggs" }), {
    content: [{ type: "text", text: "Saved eggs" }],
    structuredContent: { status: "completed", name: "eggs" },
  });
  assert.deepEqual(completed(), { content: [{ type: "text", text: "Done." }], structuredContent: { status: "completed" } });
  assert.deepEqual(accepted("op-1", "Mailing.", { count: 3 }), {
    content: [{ type: "text", text: "Mailing." }],
    structuredContent: { status: "accepted", operation: "op-1", count: 3 },
  });
  assert.deepEqual(rejected("denied", "the user said no"), {
    content: [{ type: "text", text: "the user said no" }],
    isError: true,
    structuredContent: { status: "rejected", reason: { code: "denied", detail: "the user said no" } },
  });
  assert.throws(() => completed("Done.", { status: "ok" }), /^TypeError: status: a member of the outcome itself/);
  assert.throws(() => rejected("busy", "later", { reason: "why" }), /reason: a member of the outcome itself/);
  assert.equal(asResult(completed()).structuredContent.status, "completed");
});

test("case: a cancel reaches the handler's signal", async () => {
  const id = newId();
  const mcp = new ClientMCP({ url: bridge.connectUrl, token: bridge.token("client", id) });
  let started;
  const running = new Promise((resolve) => (started = resolve));
  let aborted = false;
  mcp.expose("wait", {
    handler: (args, { signal }) =>
      new Promise((resolve) => {
        signal.addEventListener("abort", () => {
          aborted = true;
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
  await waitFor(() => aborted, 5000, "the signal aborted");
  assert.equal(mcp.callsCancelled, 1);
  await mcp.close();
});

test("case: the signal aborts when the connection drops", async () => {
  const own = await Bridge.start();
  const id = newId();
  const mcp = new ClientMCP({ url: own.connectUrl, token: own.token("client", id), backoff: [50, 100] });
  let started;
  const running = new Promise((resolve) => (started = resolve));
  let signal;
  mcp.expose("wait", {
    handler: (args, context) => {
      signal = context.signal;
      started();
      return new Promise(() => {});
    },
  });
  await mcp.connect();
  const call = own.call(id, "wait").catch(() => null);
  await running;
  await own.stop();
  await waitFor(() => signal.aborted, 5000, "the signal aborted");
  await call;
  await mcp.close();
});

test("case: a result over 4 MiB becomes a tool error saying so", async () => {
  const id = newId();
  const mcp = new ClientMCP({ url: bridge.connectUrl, token: bridge.token("client", id) });
  mcp.expose("huge", { handler: () => "x".repeat(4 * 1024 * 1024) });
  mcp.expose("wide", { handler: () => "é".repeat(2 * 1024 * 1024) }); // 2 Mi characters, 4 MiB of UTF-8
  await mcp.connect();
  for (const name of ["huge", "wide"]) {
    assert.deepEqual(await bridge.call(id, name), {
      content: [{ type: "text", text: "The result is too large to deliver (over 4 MiB)." }],
      isError: true,
    });
  }
  assert.equal(mcp.state, "online"); // the connection survived it
  await mcp.close();
});

test("case: an idle app pings and stays connected", async () => {
  const own = await Bridge.start("--app-idle-timeout", "0.6s");
  const id = newId();
  RecordingSocket.all = [];
  const mcp = new ClientMCP({ url: own.connectUrl, token: own.token("client", id), pingInterval: 200, reconnect: false, WebSocket: RecordingSocket });
  mcp.expose("echo", { handler: () => "ok" });
  await mcp.connect();
  await sleep(1800); // three of the bridge's idle timeouts
  assert.equal(mcp.state, "online");
  assert.equal(mcp.closeCode, null);
  const [socket] = RecordingSocket.all;
  assert.ok(socket.sent.filter((text) => text === PING).length >= 6);
  assert.ok(socket.received.filter((text) => text === '{"type":"pong"}').length >= 6);
  await mcp.close();
  await own.stop();
});

test("case: without pings the bridge closes 4408 and the app reconnects", async () => {
  const own = await Bridge.start("--app-idle-timeout", "0.3s");
  const id = newId();
  const mcp = new ClientMCP({ url: own.connectUrl, token: own.token("client", id), pingInterval: 60000, backoff: [50, 100] });
  mcp.expose("echo", { handler: () => "ok" });
  const codes = [];
  mcp.addEventListener("statechange", (event) => event.state === "offline" && codes.push(event.code));
  await mcp.connect();
  await waitFor(() => codes.includes(4408) && mcp.state === "online", 5000, "closed 4408, then online again");
  assert.equal(mcp.attempts, 2);
  await mcp.close();
  await own.stop();
});

test("case: ping and dead-link timings (fake clock)", async () => {
  const id = newId();
  const clock = new FakeClock();
  RecordingSocket.all = [];
  const mcp = new ClientMCP({ url: bridge.connectUrl, token: bridge.token("client", id), clock, random: () => 0.5, WebSocket: RecordingSocket });
  mcp.expose("echo", { handler: () => "ok" });
  await mcp.connect();
  const [socket] = RecordingSocket.all;
  assert.equal(socket.sent.length, 1); // the register
  clock.advance(24999);
  assert.equal(socket.sent.length, 1);
  clock.advance(1); // 25 s without sending: exactly the ping text (ClientMCP v1 §3.2)
  assert.equal(socket.sent[1], '{"type":"ping"}');
  await waitFor(() => socket.received.includes('{"type":"pong"}'), 5000, "the pong");
  clock.advance(10000); // answered: the link lives
  assert.equal(mcp.state, "online");
  socket.deaf = true; // from now on the client hears nothing
  clock.advance(15000); // 25 s after the last ping
  assert.equal(socket.sent[2], PING);
  await waitFor(() => socket.received.length === 3, 5000, "the second pong, unheard");
  clock.advance(9999);
  assert.equal(mcp.state, "online");
  clock.advance(1); // 10 s after a ping with nothing heard: dead
  assert.equal(mcp.state, "offline");
  assert.equal(mcp.closeCode, 1006);
  assert.equal(mcp.closeReason, "no answer to ping");
  assert.deepEqual(clock.pending(), [500]); // the first wait, jitter 0.5 x 1 at random() = 0.5
  clock.advance(500);
  await waitFor(() => mcp.state === "online", 5000, "online again");
  assert.equal(RecordingSocket.all.length, 2);
  assert.equal(RecordingSocket.all[1].sent[0], mcp.registerMessage()); // registered again
  await mcp.close();
});

test("case: the backoff doubles up to its cap, with jitter (fake clock)", async () => {
  const url = `ws://127.0.0.1:${await freePort()}/connect`; // nothing listens there
  const clock = new FakeClock();
  const draws = [0, 0.999, 0.5, 0, 0.5, 0.999, 0.5];
  let draw = 0;
  const mcp = new ClientMCP({ url, token: "t", clock, random: () => draws[draw++], backoff: [500, 4000] });
  const connecting = mcp.connect({ timeout: null }).catch((error) => error);
  const waits = [];
  for (let attempt = 1; attempt <= 7; attempt += 1) {
    await waitFor(() => clock.timers.size > 0, 5000, `attempt ${attempt} failed`);
    const [wait] = clock.pending();
    waits.push(Math.round(wait));
    assert.equal(mcp.state, "offline");
    assert.match(mcp.lastError, /cannot connect to .*: the connection failed/);
    clock.advance(wait);
  }
  // 500, 1000, 2000, 4000, 4000, ... each drawn between 0.5 and 1.5 times that
  assert.deepEqual(waits, [250, 1499, 2000, 2000, 4000, 5996, 4000]);
  await mcp.close();
  assert.equal((await connecting).message, `closed before registering with ${url}`);
});

// The wait the client scheduled after attempt `attempt` failed (the fake clock holds only it then).
async function waitAfter(mcp, clock, attempt) {
  await waitFor(() => mcp.attempts === attempt && mcp.state === "offline", 5000, `attempt ${attempt} ended`);
  const pending = clock.pending();
  assert.equal(pending.length, 1, `${pending}`);
  return pending[0];
}

test("case: the backoff starts over only after a connection stayed registered (fake clock)", async () => {
  // One app connection allowed: while `holder` has it, every other is closed with 4429 at open
  // (docs/limits.md); an app silent for 0.3 s is closed with 4408.
  const own = await Bridge.start("--max-app-connections", "1", "--app-idle-timeout", "0.3s");
  const holder = new ClientMCP({ url: own.connectUrl, token: own.token("client", newId()), pingInterval: 50 });
  await holder.connect();
  const clock = new FakeClock();
  const mcp = new ClientMCP({ url: own.connectUrl, token: own.token("client", newId()), clock, random: () => 0.5, backoff: [500, 4000] });
  mcp.expose("echo", { handler: () => "ok" });
  const codes = [];
  mcp.addEventListener("statechange", (event) => event.state === "offline" && codes.push(event.code));
  const connecting = mcp.connect({ timeout: null });
  const waits = [];
  for (let attempt = 1; attempt <= 5; attempt += 1) {
    waits.push(await waitAfter(mcp, clock, attempt));
    if (attempt < 5) clock.advance(waits.at(-1));
  }
  assert.deepEqual(codes, [4429, 4429, 4429, 4429, 4429]); // each attempt had its handshake
  assert.deepEqual(waits, [500, 1000, 2000, 4000, 4000]);
  await holder.close();
  clock.advance(4000);
  await connecting; // registered
  clock.advance(3999); // registered 1 ms short of backoff[1] when the bridge closes it for silence
  waits.push(await waitAfter(mcp, clock, 6));
  assert.equal(mcp.closeCode, 4408);
  assert.equal(waits.at(-1), 4000);
  clock.advance(4000);
  await waitFor(() => mcp.state === "online", 5000, "registered again");
  clock.advance(4000); // registered for backoff[1]: the next close starts the backoff over
  waits.push(await waitAfter(mcp, clock, 7));
  assert.equal(mcp.closeCode, 4408);
  assert.equal(waits.at(-1), 500);
  await mcp.close();
  await own.stop();
});

test("a token function whose tokens are refused backs off (fake clock)", async () => {
  const id = newId();
  const clock = new FakeClock();
  let calls = 0;
  const token = () => {
    calls += 1;
    return bridge.token("agent", id); // an agent's token, refused to an app with 4401
  };
  const mcp = new ClientMCP({ url: bridge.connectUrl, token, clock, random: () => 0.5, backoff: [500, 4000] });
  const connecting = mcp.connect({ timeout: null }).catch((error) => error);
  const waits = [];
  for (let attempt = 1; attempt <= 5; attempt += 1) {
    waits.push(await waitAfter(mcp, clock, attempt));
    assert.equal(mcp.closeCode, 4401);
    if (attempt < 5) clock.advance(waits.at(-1));
  }
  assert.deepEqual(waits, [500, 1000, 2000, 4000, 4000]);
  assert.equal(calls, 5);
  await mcp.close();
  assert.match((await connecting).message, /^closed before registering/);
});

test("case: connect gives up at its timeout, saying why", async () => {
  const url = `ws://127.0.0.1:${await freePort()}/connect`;
  const mcp = new ClientMCP({ url, token: "t", backoff: [50, 200] });
  const started = Date.now();
  await assert.rejects(mcp.connect({ timeout: 1000 }), (error) => {
    assert.match(error.message, new RegExp(`^not registered with ${url} within 1 s, after \\d+ attempts: cannot connect`));
    return true;
  });
  const took = Date.now() - started;
  assert.ok(took >= 1000 && took < 1500, `${took} ms`);
  const attempts = mcp.attempts;
  await sleep(300);
  assert.equal(mcp.attempts, attempts); // nothing left running
});

test("case: it reconnects and re-registers after a bridge restart", async () => {
  const own = await Bridge.start();
  const id = newId();
  let tokens = 0;
  const mcp = new ClientMCP({
    url: own.connectUrl,
    token: () => {
      tokens += 1;
      return own.token("client", id);
    },
    backoff: [50, 200],
  });
  mcp.expose("echo", { handler: () => "ok" });
  const codes = [];
  mcp.addEventListener("statechange", (event) => event.state === "offline" && codes.push(event.code));
  await mcp.connect();
  await own.restart();
  await waitFor(() => mcp.state === "online" && codes.length > 0, 10000, "online again");
  assert.equal(codes[0], 1001); // the bridge shutting down (docs/protocol.md, Close codes)
  assert.deepEqual(await own.toolNames(id), ["echo"]);
  assert.equal(tokens, mcp.attempts); // the token function: once per connection attempt
  await mcp.close();
  await own.stop();
});

test("case: reconnect rules by close code", () => {
  for (const code of [1000, 1001, 1006, 1009, 1011, 4408, 4429]) assert.equal(noReconnectReason(code, false), null, code);
  for (const code of [4409, 4400, 1002, 1007]) {
    assert.notEqual(noReconnectReason(code, false), null, code);
    assert.notEqual(noReconnectReason(code, true), null, code);
  }
  assert.notEqual(noReconnectReason(4401, false), null);
  assert.equal(noReconnectReason(4401, true), null);
});

test("a token function that fails is retried with the backoff, saying why", async () => {
  const id = newId();
  let calls = 0;
  const mcp = new ClientMCP({
    url: bridge.connectUrl,
    token: async () => {
      calls += 1;
      if (calls === 1) throw new Error("the backend is down");
      return bridge.token("client", id);
    },
    backoff: [10, 20],
  });
  const errors = [];
  mcp.addEventListener("statechange", (event) => event.state === "offline" && errors.push(mcp.lastError));
  await mcp.connect();
  assert.deepEqual(errors, ["the token function failed: Error: the backend is down"]);
  assert.equal(calls, 2);
  await mcp.close();
});

test("close() while the token function runs stops the attempt", async () => {
  const id = newId();
  let release;
  const mcp = new ClientMCP({ url: bridge.connectUrl, token: () => new Promise((resolve) => (release = resolve)) });
  mcp.expose("echo", { handler: () => "ok" }); // listed, were a connection to open after all
  const connecting = mcp.connect().catch((error) => error.message);
  await waitFor(() => release !== undefined, 5000, "the token function called");
  await mcp.close();
  release(bridge.token("client", id));
  assert.match(await connecting, /^closed before registering/);
  await sleep(100);
  assert.equal(mcp.state, "offline");
  assert.deepEqual(await bridge.toolNames(id), []);
});

test("connect() again after close(), while a token function runs, opens one connection", async () => {
  const id = newId();
  const releases = [];
  RecordingSocket.all = [];
  const mcp = new ClientMCP({
    url: bridge.connectUrl,
    token: () => new Promise((resolve) => releases.push(resolve)),
    WebSocket: RecordingSocket,
  });
  mcp.expose("echo", { handler: () => "ok" });
  const first = mcp.connect().catch(() => null);
  await waitFor(() => releases.length === 1, 5000, "the first token asked for");
  await mcp.close();
  await first;
  const second = mcp.connect();
  await waitFor(() => releases.length === 2, 5000, "the second token asked for");
  for (const release of releases) release(bridge.token("client", id));
  await second;
  await sleep(100); // a stray first attempt would have connected and replaced this one by now
  assert.equal(RecordingSocket.all.length, 1);
  assert.equal(mcp.state, "online");
  await mcp.close();
});

// -- progress and trace context (docs/protocol.md, Progress; docs/protocol.md, Trace context) --
// The agent is plain fetch, no SDK: its tools/call asks for progress with _meta.progressToken
// and carries W3C trace context in the traceparent and tracestate headers.

const TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT_ID = "00f067aa0ba902b7";
const TRACEPARENT = `00-${TRACE_ID}-${PARENT_ID}-01`;
const TRACESTATE = "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE";

test("progress: the agent gets the handler's reports on the SSE answer, in order, and the handler its traceparent", async () => {
  const id = newId();
  const mcp = new ClientMCP({ url: bridge.connectUrl, token: bridge.token("client", id) });
  let heard; // the first report reached the agent: the handler goes on
  const agentHeard = new Promise((resolve) => (heard = resolve));
  let context;
  mcp.expose("copy", {
    handler: async (args, given) => {
      context = given;
      given.report(1, 3, "Copying 1 of 3");
      await agentHeard; // the answer is a stream from the first report, not after the result
      await sleep(150); // past the bridge's pace of ten reports a second, so none is coalesced
      given.report(2, 3, "Copying 2 of 3");
      await sleep(150);
      given.report(3, 3);
      return "copied";
    },
  });
  await mcp.connect();
  const response = await bridge.request(
    id,
    "tools/call",
    { name: "copy", arguments: {}, _meta: { progressToken: "copy-1" } },
    { traceparent: TRACEPARENT, tracestate: TRACESTATE },
  );
  assert.equal(response.status, 200);
  assert.match(response.headers.get("content-type"), /^text\/event-stream/);
  const messages = [];
  for await (const message of sseMessages(response)) {
    messages.push(message);
    if (messages.length === 1) heard();
  }
  assert.deepEqual(messages, [
    { jsonrpc: "2.0", method: "notifications/progress", params: { progressToken: "copy-1", progress: 1, total: 3, message: "Copying 1 of 3" } },
    { jsonrpc: "2.0", method: "notifications/progress", params: { progressToken: "copy-1", progress: 2, total: 3, message: "Copying 2 of 3" } },
    { jsonrpc: "2.0", method: "notifications/progress", params: { progressToken: "copy-1", progress: 3, total: 3 } },
    { jsonrpc: "2.0", id: 1, result: { content: [{ type: "text", text: "copied" }] } },
  ]);
  assert.equal(context.traceparent, TRACEPARENT);
  assert.equal(context.tracestate, TRACESTATE);
  context.report(4); // the call ended: nothing is sent, and the connection stays
  await sleep(100);
  assert.equal(mcp.state, "online");
  await mcp.close();
});

test("progress: without a progressToken or trace context the agent gets a plain answer, and the handler null", async () => {
  const id = newId();
  const mcp = new ClientMCP({ url: bridge.connectUrl, token: bridge.token("client", id) });
  let context;
  mcp.expose("copy", {
    handler: (args, given) => {
      context = given;
      given.report(1, 2, "half"); // dropped by the bridge: nobody asked
      return "copied";
    },
  });
  await mcp.connect();
  const response = await bridge.request(id, "tools/call", { name: "copy", arguments: {} }, { Accept: "application/json" });
  assert.deepEqual(await response.json(), { jsonrpc: "2.0", id: 1, result: { content: [{ type: "text", text: "copied" }] } });
  assert.equal(context.traceparent, null);
  assert.equal(context.tracestate, null);
  await mcp.close();
});

test("tracing: the handler's span is a child of the agent's, through a real bridge", async () => {
  const exporter = new InMemorySpanExporter();
  const tracer = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }).getTracer("todo-app");
  const id = newId();
  const mcp = new ClientMCP({ url: bridge.connectUrl, token: bridge.token("client", id), tracing: { api, tracer } });
  mcp.expose("look", { handler: () => "seen" });
  mcp.expose("refuse", { handler: () => rejected("denied", "no") });
  await mcp.connect();
  for (const name of ["look", "refuse"]) {
    const response = await bridge.request(id, "tools/call", { name, arguments: {} }, { traceparent: TRACEPARENT, tracestate: TRACESTATE, Accept: "application/json" });
    assert.equal((await response.json()).id, 1);
  }
  const [look, refuse] = exporter.getFinishedSpans();
  assert.equal(look.name, "execute_tool look");
  assert.equal(look.spanContext().traceId, TRACE_ID);
  assert.equal(look.parentSpanContext.spanId, PARENT_ID);
  assert.equal(look.parentSpanContext.isRemote, true);
  assert.equal(look.spanContext().traceState.serialize(), TRACESTATE);
  assert.equal(look.status.code, api.SpanStatusCode.UNSET);
  assert.equal(refuse.name, "execute_tool refuse");
  assert.equal(refuse.parentSpanContext.spanId, PARENT_ID);
  assert.equal(refuse.status.code, api.SpanStatusCode.ERROR);
  assert.equal(refuse.attributes["error.type"], "tool_error");
  await mcp.close();
});
