// The app side of ClientMCP in JavaScript: one ES module, no dependencies, for browsers and
// Node 22+ (the global WebSocket). It follows the behaviour table of docs/apps.md, as
// clientmcp_fast.client (Python) does: connect with a token, expose tools, answer the bridge's
// calls, ping when idle, reconnect with backoff (ClientMCP v1 §3).
//
//   import { ClientMCP, completed } from "./clientmcp.js";
//   const mcp = new ClientMCP({ url: "ws://127.0.0.1:8080/connect", token });
//   mcp.expose("add_todo", { description: "Add a todo", inputSchema, risk: "operate",
//                            handler: ({ title }, { signal, report }) => todos.add(title) });
//   await mcp.connect();

export const SUBPROTOCOL = "clientmcp.v1";
export const PING = '{"type":"ping"}';
export const RISK_META = "io.github.clientmcp/risk";
export const MAX_MESSAGE_BYTES = 4 * 1024 * 1024; // ClientMCP v1 §3.2, §6

// docs/apps.md, Risk levels (ClientMCP v1 §9.1): the MCP annotations each risk level implies.
export const RISK_ANNOTATIONS = Object.freeze({
  observe: { readOnlyHint: true },
  operate: { readOnlyHint: false, destructiveHint: false },
  manage: { destructiveHint: true, idempotentHint: true },
  transact: { destructiveHint: true, idempotentHint: false, openWorldHint: true },
});

// What a close code says happened, in the words of docs/protocol.md.
export const CLOSE_MEANINGS = Object.freeze({
  1000: "a normal close",
  1001: "the bridge is shutting down",
  1002: "a framing error",
  1005: "no close code given",
  1006: "the connection dropped without a close frame",
  1007: "a text message that is not UTF-8",
  1009: "a message over 4 MiB",
  1011: "an unexpected condition",
  4400: "a protocol error",
  4401: "the token was refused",
  4408: "the app was silent for too long",
  4409: "replaced by a newer connection with the same client ID",
  4429: "the app did not read what the bridge sent",
});

/** A close in words: `closed with 4401 (the token was refused): bad signature`. */
export function describeClose(code, reason) {
  const meaning = CLOSE_MEANINGS[code];
  const text = `closed with ${code}` + (meaning ? ` (${meaning})` : "");
  return reason ? `${text}: ${reason}` : text;
}

/**
 * Why no reconnect follows a close with `code`, or null if one does (docs/apps.md, Connecting):
 * never after 4409 (ClientMCP v1 §3.1) nor after 4400, 1002, 1007 (the bridge refused what this
 * app sends, and would again); after 4401 only when the token is a function that can mint a new one.
 */
export function noReconnectReason(code, tokenIsFunction) {
  if (code === 4409) return "a newer connection with the same client ID replaced this one";
  if (code === 4400 || code === 1002 || code === 1007) return "the bridge refused what this app sent, and would again";
  if (code === 4401 && !tokenIsFunction) return "the token was refused, and the same token would be again";
  return null;
}

// -- results (ClientMCP v1 §3.2) and outcomes (§9.2) -----------------------------------------

/** A CallToolResult with one text block. */
export function textResult(text, { isError = false } = {}) {
  const result = { content: [{ type: "text", text }] };
  if (isError) result.isError = true;
  return result;
}

// The outcome's own members: an app's further data must not use these names (ClientMCP v1 §9.2).
const OUTCOME_MEMBERS = ["status", "operation", "reason"];

function outcome(status, data, own) {
  const taken = OUTCOME_MEMBERS.filter((name) => Object.hasOwn(data, name)).sort();
  if (taken.length) throw new TypeError(`${taken.join(", ")}: a member of the outcome itself, not free for the app's data`);
  return { status, ...own, ...data };
}

/** Outcome `completed`: the change holds, seen in the app's own state. */
export function completed(message = "Done.", data = {}) {
  return { ...textResult(message), structuredContent: outcome("completed", data, {}) };
}

/** Outcome `accepted`: it started and goes on as `operation` (a string id). */
export function accepted(operation, message = "Started.", data = {}) {
  return { ...textResult(message), structuredContent: outcome("accepted", data, { operation }) };
}

/** Outcome `rejected`: nothing changed; `code` is for the agent, `detail` for a reader. */
export function rejected(code, detail, data = {}) {
  return {
    ...textResult(detail, { isError: true }),
    structuredContent: outcome("rejected", data, { reason: { code, detail } }),
  };
}

const isPlainObject = (value) =>
  value !== null && typeof value === "object" && (Object.getPrototypeOf(value) === Object.prototype || Object.getPrototypeOf(value) === null);

/** A handler's return value as a CallToolResult (docs/apps.md, Handlers and their results). */
export function asResult(value) {
  if (isPlainObject(value) && Array.isArray(value.content)) return value;
  if (typeof value === "string") return textResult(value);
  if (value === undefined || value === null) return textResult("Done.");
  const result = textResult(JSON.stringify(value));
  if (isPlainObject(value)) result.structuredContent = value;
  return result;
}

/** The tool error a thrown value becomes: `TypeError: x is not a function`. */
export function errorResult(error) {
  const text = error instanceof Error ? `${error.name}: ${error.message}` : `Error: ${String(error)}`;
  return textResult(text, { isError: true });
}

const CLOSE_TIMEOUT_MS = 5000; // close(): how long the closing handshake may take
// docs/protocol.md, Progress: the bridge closes with 4400 over a longer message, counted in
// code points as it counts them.
export const MAX_PROGRESS_MESSAGE_CHARS = 1024;
const TOO_LARGE = "The result is too large to deliver (over 4 MiB).";
const utf8 = new TextEncoder();

/** A handler's outcome as a CallToolResult: what it returns, or the tool error of what it throws (told to `thrown`). */
async function settle(run, thrown) {
  try {
    return asResult(await run());
  } catch (error) {
    thrown?.(error);
    return errorResult(error);
  }
}

/** Throw if `report(progress, total, message)` has an argument the bridge would refuse with 4400. */
function checkReport(progress, total, message) {
  if (!Number.isFinite(progress)) throw new TypeError("report: progress must be a finite number");
  if (total !== undefined && !Number.isFinite(total)) throw new TypeError("report: total must be a finite number or undefined");
  if (message === undefined) return;
  if (typeof message !== "string") throw new TypeError("report: message must be a string or undefined");
  if (message.length > MAX_PROGRESS_MESSAGE_CHARS && [...message].length > MAX_PROGRESS_MESSAGE_CHARS) {
    throw new RangeError(`report: message over ${MAX_PROGRESS_MESSAGE_CHARS} characters`);
  }
}

// W3C Trace Context: version (not ff), trace id, parent id, flags; a later version may add fields.
const TRACEPARENT = /^(?!ff)[\da-f]{2}-([\da-f]{32})-([\da-f]{16})-([\da-f]{2})(-|$)/;

/** The OpenTelemetry context a call's span starts in: the agent's (or the bridge's) span as a remote parent, else none. */
function parentContext(api, traceparent, tracestate) {
  const found = TRACEPARENT.exec(traceparent ?? "");
  if (found) {
    const parent = { traceId: found[1], spanId: found[2], traceFlags: parseInt(found[3], 16), isRemote: true };
    if (tracestate !== null) parent.traceState = api.createTraceState(tracestate);
    if (api.trace.isSpanContextValid(parent)) return api.trace.setSpanContext(api.ROOT_CONTEXT, parent);
  }
  return api.ROOT_CONTEXT;
}

// -- the client ----------------------------------------------------------------------------

/** The states a page can show: `state` and the `statechange` event. */
export const STATES = Object.freeze(["offline", "connecting", "online", "replaced"]);

export class ClientMCP extends EventTarget {
  /**
   * @param {object} options
   * @param {string} options.url the bridge's ws://HOST:PORT/connect (wss:// behind TLS)
   * @param {string | (() => string | Promise<string>)} options.token a client token, or a function
   *   called before every connection attempt (ClientMCP v1 §7: short-lived tokens from a backend)
   * @param {string} [options.instructions] sent with every register
   * @param {(request: AuthorizeRequest) => boolean | Promise<boolean>} [options.onAuthorize] answers an OAuth
   *   client's request to use this app (docs/oauth.md): true allows; set, the app registers `consent`
   * @param {number} [options.pingInterval] ms without sending after which a ping goes (25000)
   * @param {number} [options.pongTimeout] ms after a ping with nothing heard: the link is dead (10000)
   * @param {boolean} [options.reconnect] reconnect after a connection ends or an attempt fails (true)
   * @param {[number, number]} [options.backoff] first and longest wait between attempts, ms ([500, 30000]);
   *   the wait starts over from the first only after a connection stayed registered the longest wait
   * @param {{now(): number, setTimeout: Function, clearTimeout: Function}} [options.clock] for tests
   * @param {() => number} [options.random] in [0, 1), for the backoff's jitter (Math.random)
   * @param {{api: object, tracer?: object}} [options.tracing] OpenTelemetry: `api` is the
   *   `@opentelemetry/api` module; each call's handler runs in a span of `tracer`
   *   (`api.trace.getTracer("clientmcp")`), a child of the agent's trace when the call carries one
   * @param {typeof WebSocket} [options.WebSocket] the WebSocket class (globalThis.WebSocket)
   */
  constructor({
    url,
    token,
    instructions,
    onAuthorize = null,
    pingInterval = 25000,
    pongTimeout = 10000,
    reconnect = true,
    backoff = [500, 30000],
    clock,
    random = Math.random,
    tracing = null,
    WebSocket: Socket = globalThis.WebSocket,
  } = {}) {
    super();
    if (typeof url !== "string") throw new TypeError("url must be the bridge's ws:// or wss:// URL");
    if (typeof token !== "string" && typeof token !== "function") throw new TypeError("token must be a string or a function");
    if (tracing !== null && typeof tracing?.api?.trace?.getTracer !== "function") {
      throw new TypeError("tracing.api must be the @opentelemetry/api module");
    }
    if (tracing?.tracer !== undefined && typeof tracing.tracer?.startActiveSpan !== "function") {
      throw new TypeError("tracing.tracer must be an OpenTelemetry Tracer");
    }
    this.url = url;
    this.instructions = instructions;
    this.pingInterval = pingInterval;
    this.pongTimeout = pongTimeout;
    this.reconnect = reconnect;
    this.backoff = backoff;
    this.tools = new Map(); // name -> { definition, handler }
    this.state = "offline";
    this.closeCode = null;
    this.closeReason = "";
    this.lastError = null; // the last failure to connect, or the last close, in words
    this.callsCancelled = 0;
    this.onstatechange = null; // called with each statechange event, as a listener of it is
    this.attempts = 0;
    this._token = token;
    this._clock = clock ?? {
      now: () => performance.now(),
      setTimeout: (fn, ms) => setTimeout(fn, ms),
      clearTimeout: (id) => clearTimeout(id),
    };
    this._random = random;
    this._Socket = Socket;
    this._conn = null;
    this._stopping = true;
    this._retryTimer = null;
    this._delay = backoff[0];
    this._waiters = []; // connect() calls waiting for the first registered
    this._run = 0; // counts connect() calls that started attempts: an attempt of an older one stops
    this._onAuthorize = onAuthorize;
    this._tracing = tracing && { api: tracing.api, tracer: tracing.tracer ?? tracing.api.trace.getTracer("clientmcp") };
  }

  /**
   * Who answers an OAuth client's request (`authorize`, docs/oauth.md): called with
   * `{ id, clientName, clientOrigin, code }`, it shows them to the user and returns (or resolves
   * to) true to allow. While one is set, every register declares `consent`.
   */
  get onAuthorize() {
    return this._onAuthorize;
  }

  set onAuthorize(handler) {
    if (handler !== null && handler !== undefined && typeof handler !== "function") throw new TypeError("onAuthorize must be a function or null");
    const declared = typeof this._onAuthorize === "function";
    this._onAuthorize = handler ?? null;
    if (declared !== (typeof this._onAuthorize === "function")) this._registerIfConnected();
  }

  // -- declaring tools ---------------------------------------------------------------------

  /** Declare (or replace) a tool; while connected the whole new set is registered at once. */
  expose(name, { handler, description, inputSchema, risk, annotations, _meta, ...members } = {}) {
    if (typeof handler !== "function") throw new TypeError(`expose("${name}"): handler must be a function`);
    const definition = { name };
    if (description !== undefined) definition.description = description;
    definition.inputSchema = inputSchema ?? { type: "object" };
    if (risk !== undefined) {
      if (!Object.hasOwn(RISK_ANNOTATIONS, risk)) throw new RangeError(`risk must be one of ${Object.keys(RISK_ANNOTATIONS).join(", ")}`);
      definition.annotations = { ...RISK_ANNOTATIONS[risk], ...annotations };
      definition._meta = { ..._meta, [RISK_META]: risk };
    } else {
      if (annotations !== undefined) definition.annotations = annotations;
      if (_meta !== undefined) definition._meta = _meta;
    }
    Object.assign(definition, members);
    this.tools.set(name, { definition, handler });
    this._registerIfConnected();
    return this;
  }

  /** Withdraw a tool; while connected the whole new set is registered at once. */
  unexpose(name) {
    this.tools.delete(name);
    this._registerIfConnected();
    return this;
  }

  /**
   * The register message declaring the current tool set (ClientMCP v1 §3.2), and that this app
   * sends `progress` and takes trace context (docs/protocol.md): a v1 bridge ignores both.
   */
  registerMessage() {
    const message = { type: "register", tools: [...this.tools.values()].map((tool) => tool.definition), progress: true, trace: true };
    if (this.instructions !== undefined && this.instructions !== null) message.instructions = this.instructions;
    if (typeof this._onAuthorize === "function") message.consent = true;
    return JSON.stringify(message);
  }

  // -- connecting --------------------------------------------------------------------------

  /**
   * Connect and register; resolves once the bridge answered `registered` (ClientMCP v1 §3.2).
   * Failed attempts are retried with the backoff until `timeout` ms have passed. Rejects with an
   * Error whose `code` and `reason` are the close's when the bridge refused (4400 with its
   * reason, 4401, 4409), or when the timeout passed first (then nothing goes on running).
   * `timeout: null` waits as long as it takes (a page that should come online whenever it can).
   */
  connect({ timeout = 10000 } = {}) {
    if (this.state === "online") return Promise.resolve();
    const waiting = new Promise((resolve, reject) => {
      const waiter = { resolve, reject, timer: null };
      if (timeout === null || timeout === Infinity) {
        this._waiters.push(waiter);
        return;
      }
      waiter.timer = this._clock.setTimeout(() => {
        this._waiters = this._waiters.filter((w) => w !== waiter);
        const tries = this.attempts === 1 ? "1 attempt" : `${this.attempts} attempts`;
        const error = new Error(`not registered with ${this.url} within ${timeout / 1000} s, after ${tries}: ${this.lastError ?? "still connecting"}`);
        error.code = this.closeCode;
        error.reason = this.closeReason;
        if (this._waiters.length === 0) this._halt();
        reject(error);
      }, timeout);
      this._waiters.push(waiter);
    });
    if (this._stopping) {
      this._stopping = false;
      this._run += 1;
      this.attempts = 0;
      this.lastError = null;
      this._delay = this.backoff[0];
      this._attempt();
    }
    return waiting;
  }

  /** Close the connection (1000) and stop reconnecting. Resolves once it is closed. */
  close() {
    this._stopping = true;
    this._clearRetry();
    const conn = this._conn;
    this._failWaiters(new Error(`closed before registering with ${this.url}`));
    if (!conn) {
      this._setState("offline");
      return Promise.resolve();
    }
    try {
      conn.ws.close(1000);
    } catch {}
    if (!conn.opened) {
      // Not open yet: nothing to close gracefully, and some WebSockets never report this one.
      this._drop(conn, 1000, "");
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      conn.onEnd = resolve;
      // A link that died says nothing back: give the closing handshake a while, then let go.
      conn.closeTimer = this._clock.setTimeout(() => this._drop(conn, 1006, "no answer to the close"), CLOSE_TIMEOUT_MS);
    });
  }

  // A stop without a closing handshake: connect() gave up.
  _halt() {
    this._stopping = true;
    this._clearRetry();
    const conn = this._conn;
    if (conn) {
      this._drop(conn, 1006, "connect() gave up");
      try {
        conn.ws.close();
      } catch {}
    }
    this._setState("offline");
  }

  _clearRetry() {
    if (this._retryTimer !== null) this._clock.clearTimeout(this._retryTimer);
    this._retryTimer = null;
  }

  _setState(state, code = this.closeCode, reason = this.closeReason) {
    if (this.state === state) return;
    this.state = state;
    const event = new Event("statechange");
    event.state = state;
    event.code = code;
    event.reason = reason;
    this.dispatchEvent(event);
    if (typeof this.onstatechange === "function") this.onstatechange(event);
  }

  _failWaiters(error) {
    const waiters = this._waiters;
    this._waiters = [];
    for (const waiter of waiters) {
      if (waiter.timer !== null) this._clock.clearTimeout(waiter.timer);
      waiter.reject(error);
    }
  }

  async _attempt() {
    this._retryTimer = null;
    this.attempts += 1;
    const run = this._run;
    this._setState("connecting");
    let token;
    try {
      token = typeof this._token === "function" ? await this._token() : this._token;
      if (typeof token !== "string" || !token) throw new TypeError("it returned no token");
    } catch (error) {
      if (run !== this._run) return;
      this.closeCode = null;
      this.closeReason = "";
      this.lastError = `the token function failed: ${error?.name ?? "Error"}: ${error?.message ?? error}`;
      this._afterEnd();
      return;
    }
    if (this._stopping || run !== this._run) return; // closed, or closed and connected again, meanwhile
    let ws;
    try {
      ws = new this._Socket(this.url, [SUBPROTOCOL, token]);
    } catch (error) {
      this.closeCode = null;
      this.closeReason = "";
      this.lastError = `cannot open ${this.url}: ${error.message}`;
      this._afterEnd();
      return;
    }
    const now = this._clock.now();
    const conn = { ws, opened: false, registered: false, registeredAt: null, pending: 0, lastSent: now, lastHeard: now, unanswered: null, timer: null, calls: new Map(), ended: false, onEnd: null };
    this._conn = conn;
    ws.onopen = () => {
      conn.opened = true;
      conn.lastHeard = this._clock.now();
      this._sendRegister(conn);
      this._keepAlive(conn);
    };
    ws.onmessage = (event) => {
      conn.lastHeard = this._clock.now();
      this._onMessage(conn, event.data);
    };
    ws.onerror = () => {
      // Once open, a close event follows with the code. A failed attempt is over now: browsers
      // follow it with a close (1006), but Node 22's WebSocket may not.
      if (!conn.opened) this._drop(conn, 1006, "");
    };
    ws.onclose = (event) => this._drop(conn, event.code, event.reason);
  }

  // The connection ended (closed by either side, dropped, or found dead): once only.
  _drop(conn, code, reason) {
    if (conn.ended) return;
    conn.ended = true;
    conn.ws.onopen = conn.ws.onmessage = conn.ws.onclose = conn.ws.onerror = null;
    if (conn.timer !== null) this._clock.clearTimeout(conn.timer);
    if (conn.closeTimer) this._clock.clearTimeout(conn.closeTimer);
    for (const call of conn.calls.values()) call.abort(new Error("the connection ended"));
    conn.calls.clear();
    if (this._conn === conn) this._conn = null;
    this.closeCode = code;
    this.closeReason = reason ?? "";
    if (conn.opened || code !== 1006) this.lastError = this._stopping ? null : describeClose(code, this.closeReason);
    else this.lastError = `cannot connect to ${this.url}: the connection failed (is the bridge running?)`;
    // Only a connection that stayed registered as long as the longest wait starts the backoff over:
    // one closed at the handshake (4429 at the app cap, a refused token) or soon after would
    // otherwise be retried every half second.
    if (conn.registeredAt !== null && this._clock.now() - conn.registeredAt >= this.backoff[1]) this._delay = this.backoff[0];
    const onEnd = conn.onEnd;
    this._afterEnd();
    if (onEnd) onEnd();
  }

  _afterEnd() {
    if (this._stopping) {
      this._setState("offline");
      return;
    }
    const refusal = this.reconnect ? noReconnectReason(this.closeCode, typeof this._token === "function") : "reconnect is off";
    if (refusal !== null) {
      this._stopping = true;
      const error = new Error(`not registered with ${this.url}: ${this.lastError ?? "the connection ended"}`);
      error.code = this.closeCode;
      error.reason = this.closeReason;
      this._failWaiters(error);
      this._setState(this.closeCode === 4409 ? "replaced" : "offline");
      return;
    }
    this._setState("offline");
    const wait = this._delay * (0.5 + this._random());
    this._delay = Math.min(this._delay * 2, this.backoff[1]);
    this._retryTimer = this._clock.setTimeout(() => this._attempt(), wait);
  }

  _send(conn, text) {
    if (conn.ended) return;
    conn.lastSent = this._clock.now();
    conn.ws.send(text);
  }

  _registerIfConnected() {
    const conn = this._conn;
    if (conn && conn.opened && !conn.ended) this._sendRegister(conn);
  }

  _sendRegister(conn) {
    conn.pending += 1;
    this._send(conn, this.registerMessage());
  }

  // ClientMCP v1 §3.2: ping after pingInterval without sending; nothing heard within pongTimeout
  // of a ping means a dead link. Waiting for an answer never holds up the next ping.
  _keepAlive(conn) {
    conn.timer = null;
    if (conn.ended) return;
    for (;;) {
      const now = this._clock.now();
      if (conn.unanswered !== null && conn.lastHeard >= conn.unanswered) conn.unanswered = null;
      if (conn.unanswered !== null && now >= conn.unanswered + this.pongTimeout) {
        // A dead link may never deliver a close: drop it now, and close it for the record.
        try {
          conn.ws.close(1000, "no answer to ping");
        } catch {}
        this._drop(conn, 1006, "no answer to ping");
        return;
      }
      if (now - conn.lastSent >= this.pingInterval) {
        this._send(conn, PING);
        if (conn.unanswered === null) conn.unanswered = now;
        continue;
      }
      let wake = conn.lastSent + this.pingInterval;
      if (conn.unanswered !== null) wake = Math.min(wake, conn.unanswered + this.pongTimeout);
      conn.timer = this._clock.setTimeout(() => this._keepAlive(conn), Math.max(0, wake - now));
      return;
    }
  }

  _onMessage(conn, data) {
    let message;
    try {
      message = JSON.parse(data);
    } catch {
      return; // the bridge sends JSON only; nothing to answer
    }
    if (message === null || typeof message !== "object") return;
    if (message.type === "registered") {
      conn.pending -= 1;
      if (!conn.registered) {
        conn.registered = true;
        conn.registeredAt = this._clock.now();
        this.lastError = null;
        this._setState("online");
        const waiters = this._waiters;
        this._waiters = [];
        for (const waiter of waiters) {
          if (waiter.timer !== null) this._clock.clearTimeout(waiter.timer);
          waiter.resolve();
        }
      }
    } else if (message.type === "call") {
      this._answer(conn, message);
    } else if (message.type === "cancel") {
      const call = conn.calls.get(message.id);
      if (call) {
        conn.calls.delete(message.id);
        this.callsCancelled += 1;
        call.abort(new Error("the call was cancelled"));
      }
    } else if (message.type === "authorize" && typeof message.id === "string") {
      this._consent(conn, message);
    } // pong, and types unknown to v1: nothing to do (ClientMCP v1 §3.2)
  }

  /** Ask `onAuthorize` about an OAuth client's request and answer `consent`; no handler or a throw denies. */
  async _consent(conn, message) {
    const client = message.client !== null && typeof message.client === "object" ? message.client : {};
    const request = {
      id: message.id,
      clientName: typeof client.name === "string" ? client.name : null,
      clientOrigin: typeof client.uri === "string" ? client.uri : "",
      code: typeof message.code === "string" ? message.code : "",
    };
    let allow = false;
    const handler = this._onAuthorize;
    if (typeof handler === "function") {
      try {
        allow = (await handler(request)) === true;
      } catch {
        allow = false; // a handler that fails lets no one in
      }
    }
    this._send(conn, JSON.stringify({ type: "consent", id: message.id, allow }));
  }

  async _answer(conn, { id, name, arguments: args, traceparent, tracestate }) {
    const tool = this.tools.get(name);
    const controller = new AbortController();
    conn.calls.set(id, controller);
    const context = {
      signal: controller.signal,
      traceparent: typeof traceparent === "string" ? traceparent : null,
      tracestate: typeof tracestate === "string" ? tracestate : null,
      report: (progress, total, message) => {
        checkReport(progress, total, message);
        if (conn.calls.get(id) !== controller) return; // answered, cancelled, or the connection ended
        this._send(conn, JSON.stringify({ type: "progress", id, progress, total, message }));
      },
    };
    let result;
    if (!tool) {
      result = textResult(`Unknown tool: ${name}`, { isError: true });
    } else {
      const run = () => tool.handler(args ?? {}, context);
      result = await (this._tracing ? this._traced(name, context, run) : settle(run));
    }
    if (controller.signal.aborted || conn.calls.get(id) !== controller) return; // cancelled: no result wanted
    conn.calls.delete(id);
    let payload;
    try {
      payload = JSON.stringify({ type: "result", id, result });
    } catch (error) {
      payload = JSON.stringify({ type: "result", id, result: errorResult(error) });
    }
    if (payload.length * 3 > MAX_MESSAGE_BYTES && utf8.encode(payload).length > MAX_MESSAGE_BYTES) {
      payload = JSON.stringify({ type: "result", id, result: textResult(TOO_LARGE, { isError: true }) });
    }
    this._send(conn, payload);
  }

  /** Run a handler in an OpenTelemetry span, execute_tool, that ends with it; its result as settle() gives it. */
  _traced(name, context, run) {
    const { api, tracer } = this._tracing;
    const attributes = { "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name, "mcp.method.name": "tools/call" };
    const parent = parentContext(api, context.traceparent, context.tracestate);
    return tracer.startActiveSpan(`execute_tool ${name}`, { kind: api.SpanKind.INTERNAL, attributes }, parent, async (span) => {
      try {
        let thrown = null; // what the handler threw, as an Error; else a tool error is one it returned
        const result = await settle(run, (error) => (thrown = error instanceof Error ? error : new Error(String(error))));
        // A cancelled call, or one whose connection ended, is no error of the tool's.
        if (result.isError === true && !context.signal.aborted) {
          if (thrown) span.recordException(thrown);
          span.setAttribute("error.type", thrown ? thrown.name : "tool_error");
          span.setStatus({ code: api.SpanStatusCode.ERROR, message: thrown ? result.content[0].text : undefined });
        }
        return result;
      } finally {
        span.end();
      }
    });
  }
}
