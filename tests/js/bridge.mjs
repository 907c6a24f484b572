// What the JavaScript client's tests share: a real bridge (`clientmcp serve`, the command the
// pytest wrapper names in CLIENTMCP_COMMAND) on 127.0.0.1, tokens for it, an agent, a fake clock.
import { spawn } from "node:child_process";
import { createHmac, randomBytes } from "node:crypto";
import net from "node:net";
import { setTimeout as sleep } from "node:timers/promises";

const COMMAND = process.env.CLIENTMCP_COMMAND ?? "clientmcp";
// Every bridge started, stopped when this process exits however the tests ended.
const running = new Set();
process.on("exit", () => {
  for (const child of running) child.kill("SIGKILL");
});
export const SECRET = randomBytes(24).toString("hex");

const base64url = (data) => Buffer.from(data).toString("base64url");

/** An HS256 JWT as `clientmcp token` mints it (ClientMCP v1 §2). */
export function mint(role, sub, ttl = 3600, secret = SECRET) {
  const head = base64url(JSON.stringify({ alg: "HS256", typ: "JWT" }));
  const body = base64url(JSON.stringify({ sub, role, exp: Math.floor(Date.now() / 1000) + ttl }));
  const signature = createHmac("sha256", secret).update(`${head}.${body}`).digest("base64url");
  return `${head}.${body}.${signature}`;
}

export function freePort() {
  return new Promise((resolve, reject) => {
    const probe = net.createServer();
    probe.on("error", reject);
    probe.listen(0, "127.0.0.1", () => {
      const { port } = probe.address();
      probe.close(() => resolve(port));
    });
  });
}

/** Wait until `predicate()` holds (polled), or fail after `timeout` ms. */
export async function waitFor(predicate, timeout = 10000, what = "the condition") {
  const giveUp = Date.now() + timeout;
  while (!(await predicate())) {
    if (Date.now() > giveUp) throw new Error(`${what} never held within ${timeout} ms`);
    await sleep(10);
  }
}

/** `clientmcp serve` on 127.0.0.1, started again on the same port by restart(). */
export class Bridge {
  constructor(port, flags) {
    this.port = port;
    this.flags = flags;
    this.process = null;
  }

  static async start(...flags) {
    const bridge = new Bridge(await freePort(), flags);
    await bridge.run();
    return bridge;
  }

  get connectUrl() {
    return `ws://127.0.0.1:${this.port}/connect`;
  }

  get mcpUrl() {
    return `http://127.0.0.1:${this.port}/mcp`;
  }

  /** Run it; resolves once it logged that it listens (its own signal, no sleep). */
  run() {
    const child = spawn(COMMAND, ["serve", "--host", "127.0.0.1", "--port", String(this.port), "--log", "info", ...this.flags], {
      env: { ...process.env, CLIENTMCP_SECRET: SECRET },
      stdio: ["ignore", "ignore", "pipe"],
    });
    this.process = child;
    running.add(child);
    this.exited = new Promise((resolve) => child.on("exit", resolve));
    child.on("exit", () => running.delete(child));
    return new Promise((resolve, reject) => {
      let log = "";
      const onData = (chunk) => {
        log += chunk;
        if (log.includes("listening on")) {
          child.stderr.off("data", onData);
          child.stderr.resume();
          resolve();
        }
      };
      child.stderr.setEncoding("utf8");
      child.stderr.on("data", onData);
      child.on("exit", (code) => reject(new Error(`the bridge exited with ${code}: ${log}`)));
      child.on("error", reject);
    });
  }

  /** SIGTERM, as an operator stops it: apps are closed with 1001 (docs/protocol.md, Shutdown). */
  async stop() {
    if (this.process && this.process.exitCode === null) {
      this.process.kill("SIGTERM");
      await this.exited;
    }
  }

  async restart() {
    await this.stop();
    await this.run();
  }

  token(role, id) {
    return mint(role, id);
  }

  /** One JSON-RPC request as an agent of `id` (the legacy era, no session needed): its result. */
  async rpc(id, method, params = {}, { signal } = {}) {
    const response = await fetch(this.mcpUrl, {
      method: "POST",
      headers: { Authorization: `Bearer ${mint("agent", id)}`, "Content-Type": "application/json", Accept: "application/json" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params }),
      signal,
    });
    const answer = await response.json();
    if (answer.error) throw new Error(`${method}: ${JSON.stringify(answer.error)}`);
    return answer.result;
  }

  /**
   * One JSON-RPC request as an agent of `id` that takes an SSE answer (Accept names both), with
   * extra `headers`: the fetch Response, for sseMessages() to read as it comes.
   */
  request(id, method, params = {}, headers = {}) {
    return fetch(this.mcpUrl, {
      method: "POST",
      headers: {
        Authorization: `Bearer ${mint("agent", id)}`,
        "Content-Type": "application/json",
        Accept: "application/json, text/event-stream",
        ...headers,
      },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params }),
    });
  }

  call(id, name, args = {}, options) {
    return this.rpc(id, "tools/call", { name, arguments: args }, options);
  }

  async toolNames(id) {
    return (await this.rpc(id, "tools/list")).tools.map((tool) => tool.name);
  }
}

/** The JSON-RPC messages of an SSE answer, each as soon as its event has come. */
export async function* sseMessages(response) {
  let buffer = "";
  for await (const chunk of response.body.pipeThrough(new TextDecoderStream())) {
    buffer += chunk.replaceAll("\r\n", "\n");
    for (let end = buffer.indexOf("\n\n"); end !== -1; end = buffer.indexOf("\n\n")) {
      const lines = buffer.slice(0, end).split("\n");
      buffer = buffer.slice(end + 2);
      const data = lines.filter((line) => line.startsWith("data:")).map((line) => line.slice(5).replace(/^ /, ""));
      if (data.length) yield JSON.parse(data.join("\n")); // a comment alone (a keep-alive) is no message
    }
  }
}

/** A clock for the client's `clock` option: time moves only when the test says. */
export class FakeClock {
  constructor() {
    this.time = 0;
    this.timers = new Map();
    this.nextId = 1;
    this.requested = []; // every delay asked for, in ms, in order
  }

  now() {
    return this.time;
  }

  setTimeout(fn, ms) {
    const id = this.nextId++;
    this.timers.set(id, { at: this.time + ms, fn, ms });
    this.requested.push(ms);
    return id;
  }

  clearTimeout(id) {
    this.timers.delete(id);
  }

  /** Move `ms` on, running every timer due on the way, in order. */
  advance(ms) {
    const target = this.time + ms;
    for (;;) {
      let next = null;
      for (const [id, timer] of this.timers) if (timer.at <= target && (next === null || timer.at < next[1].at)) next = [id, timer];
      if (next === null) break;
      this.timers.delete(next[0]);
      this.time = next[1].at;
      next[1].fn();
    }
    this.time = target;
  }

  /** The delays of the timers pending now. */
  pending() {
    return [...this.timers.values()].map((timer) => timer.ms);
  }
}

/** A WebSocket that records what the client sends and receives, and can stop hearing. */
export class RecordingSocket extends WebSocket {
  static all = [];

  constructor(url, protocols) {
    super(url, protocols);
    this.sent = [];
    this.received = [];
    this.deaf = false; // when set, the client hears nothing more (a link gone silent)
    this.addEventListener("message", (event) => this.received.push(event.data));
    RecordingSocket.all.push(this);
  }

  send(data) {
    this.sent.push(data);
    super.send(data);
  }

  set onmessage(handler) {
    super.onmessage = handler && ((event) => this.deaf || handler(event));
  }

  get onmessage() {
    return super.onmessage;
  }
}

/**
 * A WebSocket with no bridge behind it, for what the client sends and does without one: it opens
 * at once, records what the client sends, and the test plays the bridge with receive().
 */
export class FakeSocket {
  static all = [];

  constructor(url, protocols) {
    this.url = url;
    this.protocols = protocols;
    this.sent = [];
    this.onopen = this.onmessage = this.onerror = this.onclose = null;
    FakeSocket.all.push(this);
    queueMicrotask(() => this.onopen?.({}));
  }

  send(data) {
    this.sent.push(data);
  }

  close(code = 1005, reason = "") {
    queueMicrotask(() => this.onclose?.({ code, reason }));
  }

  /** A message from the bridge: an object is sent as its JSON. */
  receive(message) {
    this.onmessage?.({ data: typeof message === "string" ? message : JSON.stringify(message) });
  }

  /** What the client sent, parsed. */
  messages() {
    return this.sent.map((text) => JSON.parse(text));
  }
}
