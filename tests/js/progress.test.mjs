// Progress and trace context in the JavaScript client (sdk/js/clientmcp.js), without a bridge:
// a FakeSocket plays the bridge's side of the wire of docs/protocol.md (Progress, Trace
// context), and OpenTelemetry's SDK records the spans in memory. The same behaviour against a
// real bridge is in client.test.mjs. Run by tests/js/test_js_client.py with Node 22.
import assert from "node:assert/strict";
import { test } from "node:test";

import * as api from "@opentelemetry/api";
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";

import { ClientMCP, MAX_PROGRESS_MESSAGE_CHARS, rejected } from "../../sdk/js/clientmcp.js";
import { FakeSocket, waitFor } from "./bridge.mjs";

const TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT_ID = "00f067aa0ba902b7";
const TRACEPARENT = `00-${TRACE_ID}-${PARENT_ID}-01`;

// OpenTelemetry's active context, kept on a stack: what runs synchronously inside
// `context.with` sees the span as active (the SDK's async-hooks manager is not needed here).
class StackContextManager {
  stack = [api.ROOT_CONTEXT];
  active() {
    return this.stack.at(-1);
  }
  with(context, fn, thisArg, ...args) {
    this.stack.push(context);
    try {
      return fn.call(thisArg, ...args);
    } finally {
      this.stack.pop();
    }
  }
  bind(context, target) {
    return target;
  }
  enable() {
    return this;
  }
  disable() {
    return this;
  }
}
api.context.setGlobalContextManager(new StackContextManager());

const exporter = new InMemorySpanExporter();
const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
api.trace.setGlobalTracerProvider(provider); // for the default tracer, api.trace.getTracer("clientmcp")

/** A promise and its resolve, for a handler the test lets finish. */
function deferred() {
  let resolve;
  const promise = new Promise((done) => (resolve = done));
  return { promise, resolve };
}

/** A client connected and registered through a FakeSocket: the client and the socket. */
async function online(tools, options = {}) {
  FakeSocket.all = [];
  const mcp = new ClientMCP({ url: "ws://bridge.test/connect", token: "t", WebSocket: FakeSocket, ...options });
  for (const [name, handler] of Object.entries(tools)) mcp.expose(name, { handler });
  const connecting = mcp.connect();
  await waitFor(() => FakeSocket.all[0]?.sent.length === 1, 5000, "the register");
  const [socket] = FakeSocket.all;
  socket.receive({ type: "registered" });
  await connecting;
  return { mcp, socket };
}

/** The messages the client sent after its register. */
const sentAfterRegister = (socket) => socket.messages().slice(1);

/** The `result` for call `id`, once the client sent it. */
async function resultOf(socket, id) {
  let found;
  await waitFor(() => (found = socket.messages().find((message) => message.type === "result" && message.id === id)), 5000, `the result of ${id}`);
  return found.result;
}

test("every register declares progress and trace, and consent only with onAuthorize", async () => {
  const { mcp, socket } = await online({ echo: () => "ok" });
  assert.deepEqual(JSON.parse(socket.sent[0]), { type: "register", tools: [{ name: "echo", inputSchema: { type: "object" } }], progress: true, trace: true });
  mcp.onAuthorize = () => true; // registers again, now with consent
  await waitFor(() => socket.sent.length === 2, 5000, "the second register");
  const second = JSON.parse(socket.sent[1]);
  assert.equal(second.consent, true);
  assert.equal(second.progress, true);
  assert.equal(second.trace, true);
  await mcp.close();
});

test("report sends progress for its call, members left out when not given", async () => {
  const release = deferred();
  const { mcp, socket } = await online({
    slow: async (args, { report }) => {
      report(1, 3, "one of three");
      report(2);
      report(2.5, undefined, "almost");
      report(0, 0); // the bridge drops what does not increase: the client sends as told
      await release.promise;
      return "done";
    },
  });
  socket.receive({ type: "call", id: "c1", name: "slow", arguments: {} });
  await waitFor(() => socket.sent.length === 5, 5000, "four reports");
  assert.deepEqual(sentAfterRegister(socket), [
    { type: "progress", id: "c1", progress: 1, total: 3, message: "one of three" },
    { type: "progress", id: "c1", progress: 2 },
    { type: "progress", id: "c1", progress: 2.5, message: "almost" },
    { type: "progress", id: "c1", progress: 0, total: 0 },
  ]);
  release.resolve();
  assert.deepEqual(await resultOf(socket, "c1"), { content: [{ type: "text", text: "done" }] });
  await mcp.close();
});

test("report refuses what the bridge would close the connection for, sending nothing", async () => {
  let context;
  const release = deferred();
  const { mcp, socket } = await online({
    slow: async (args, given) => {
      context = given;
      await release.promise;
    },
  });
  socket.receive({ type: "call", id: "c1", name: "slow", arguments: {} });
  await waitFor(() => context !== undefined, 5000, "the handler called");
  const { report } = context;
  const refused = [
    [["1"], TypeError, "report: progress must be a finite number"],
    [[], TypeError, "report: progress must be a finite number"],
    [[Number.NaN], TypeError, "report: progress must be a finite number"],
    [[Infinity], TypeError, "report: progress must be a finite number"],
    [[10n], TypeError, "report: progress must be a finite number"],
    [[1, "3"], TypeError, "report: total must be a finite number or undefined"],
    [[1, null], TypeError, "report: total must be a finite number or undefined"],
    [[1, -Infinity], TypeError, "report: total must be a finite number or undefined"],
    [[1, 3, 42], TypeError, "report: message must be a string or undefined"],
    [[1, 3, null], TypeError, "report: message must be a string or undefined"],
    [[1, undefined, "x".repeat(MAX_PROGRESS_MESSAGE_CHARS + 1)], RangeError, "report: message over 1024 characters"],
    [[1, undefined, "😀".repeat(MAX_PROGRESS_MESSAGE_CHARS + 1)], RangeError, "report: message over 1024 characters"],
  ];
  for (const [args, type, message] of refused) {
    assert.throws(() => report(...args), (error) => error instanceof type && error.message === message, JSON.stringify(args, (k, v) => (typeof v === "bigint" ? `${v}n` : v)));
  }
  assert.deepEqual(sentAfterRegister(socket), []);
  // At the bound, counted in characters as the bridge counts them (an emoji is one, two UTF-16 units).
  report(1, undefined, "x".repeat(MAX_PROGRESS_MESSAGE_CHARS));
  report(2, undefined, "😀".repeat(MAX_PROGRESS_MESSAGE_CHARS));
  assert.deepEqual(
    sentAfterRegister(socket).map((message) => [...message.message].length),
    [MAX_PROGRESS_MESSAGE_CHARS, MAX_PROGRESS_MESSAGE_CHARS],
  );
  release.resolve();
  await resultOf(socket, "c1");
  await mcp.close();
});

test("report after the call ended, was cancelled, or lost its connection sends nothing", async () => {
  const contexts = {};
  const release = deferred();
  const { mcp, socket } = await online({
    quick: (args, context) => {
      contexts[args.n] = context;
      return "quick";
    },
    slow: async (args, context) => {
      contexts[args.n] = context;
      await release.promise;
    },
  });
  socket.receive({ type: "call", id: "answered", name: "quick", arguments: { n: "answered" } });
  await resultOf(socket, "answered");
  socket.receive({ type: "call", id: "cancelled", name: "slow", arguments: { n: "cancelled" } });
  socket.receive({ type: "call", id: "dropped", name: "slow", arguments: { n: "dropped" } });
  await waitFor(() => contexts.cancelled && contexts.dropped, 5000, "both handlers called");
  socket.receive({ type: "cancel", id: "cancelled" });
  assert.ok(contexts.cancelled.signal.aborted);
  const before = socket.sent.length;
  contexts.answered.report(1);
  contexts.cancelled.report(1, 2, "late");
  assert.equal(socket.sent.length, before);
  contexts.dropped.report(1); // still running: this one goes
  assert.deepEqual(JSON.parse(socket.sent.at(-1)), { type: "progress", id: "dropped", progress: 1 });
  socket.onclose({ code: 1006, reason: "" }); // the connection drops
  assert.ok(contexts.dropped.signal.aborted);
  contexts.dropped.report(2);
  assert.equal(socket.sent.length, before + 1);
  assert.throws(() => contexts.answered.report("late"), TypeError); // wrong is still wrong
  release.resolve();
  await mcp.close();
});

test("the call's traceparent and tracestate reach the handler, else null", async () => {
  const seen = {};
  const { mcp, socket } = await online({
    look: (args, { traceparent, tracestate }) => {
      seen[args.n] = [traceparent, tracestate];
    },
  });
  socket.receive({ type: "call", id: "1", name: "look", arguments: { n: 1 }, traceparent: TRACEPARENT, tracestate: "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7" });
  socket.receive({ type: "call", id: "2", name: "look", arguments: { n: 2 }, traceparent: TRACEPARENT });
  socket.receive({ type: "call", id: "3", name: "look", arguments: { n: 3 } });
  socket.receive({ type: "call", id: "4", name: "look", arguments: { n: 4 }, traceparent: 7, tracestate: ["a=b"] });
  for (const id of ["1", "2", "3", "4"]) await resultOf(socket, id);
  assert.deepEqual(seen, {
    1: [TRACEPARENT, "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"],
    2: [TRACEPARENT, null],
    3: [null, null],
    4: [null, null],
  });
  await mcp.close();
});

test("tracing: the handler runs in a span whose parent is the call's traceparent", async () => {
  exporter.reset();
  const tracer = provider.getTracer("my-app");
  const release = deferred();
  let active;
  const { mcp, socket } = await online(
    {
      slow: async () => {
        active = api.trace.getActiveSpan()?.spanContext();
        await release.promise;
        return "done";
      },
    },
    { tracing: { api, tracer } },
  );
  socket.receive({ type: "call", id: "c1", name: "slow", arguments: {}, traceparent: TRACEPARENT, tracestate: "congo=t61rcWkgMzE" });
  await waitFor(() => active !== undefined, 5000, "the handler called");
  assert.deepEqual(exporter.getFinishedSpans(), []); // the span ends with the handler, not before
  release.resolve();
  await resultOf(socket, "c1");
  const [span] = exporter.getFinishedSpans();
  assert.equal(span.name, "execute_tool slow");
  assert.equal(span.kind, api.SpanKind.INTERNAL);
  assert.equal(span.instrumentationScope.name, "my-app");
  assert.deepEqual(span.attributes, { "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "slow", "mcp.method.name": "tools/call" });
  assert.equal(span.spanContext().traceId, TRACE_ID);
  assert.equal(span.parentSpanContext.traceId, TRACE_ID);
  assert.equal(span.parentSpanContext.spanId, PARENT_ID);
  assert.equal(span.parentSpanContext.isRemote, true);
  assert.equal(span.parentSpanContext.traceState.serialize(), "congo=t61rcWkgMzE");
  assert.equal(span.spanContext().traceState.serialize(), "congo=t61rcWkgMzE");
  assert.equal(span.spanContext().traceFlags, api.TraceFlags.SAMPLED);
  assert.deepEqual(span.status, { code: api.SpanStatusCode.UNSET });
  assert.equal(active.spanId, span.spanContext().spanId); // the handler's active span is it
  await mcp.close();
});

test("tracing: a tool error and a throw end the span with status ERROR", async () => {
  exporter.reset();
  const { mcp, socket } = await online(
    {
      refuse: () => rejected("denied", "the user said no"),
      fail: () => {
        throw new RangeError("too far");
      },
      failOdd: () => Promise.reject("a string"),
    },
    { tracing: { api } },
  );
  for (const name of ["refuse", "fail", "failOdd"]) {
    socket.receive({ type: "call", id: name, name, arguments: {}, traceparent: TRACEPARENT });
    await resultOf(socket, name);
  }
  const spans = Object.fromEntries(exporter.getFinishedSpans().map((span) => [span.attributes["gen_ai.tool.name"], span]));
  assert.deepEqual(spans.refuse.status, { code: api.SpanStatusCode.ERROR });
  assert.equal(spans.refuse.attributes["error.type"], "tool_error");
  assert.deepEqual(spans.refuse.events, []);
  assert.deepEqual(spans.fail.status, { code: api.SpanStatusCode.ERROR, message: "RangeError: too far" }); // the tool error's text
  assert.equal(spans.fail.attributes["error.type"], "RangeError");
  assert.equal(spans.fail.events[0].name, "exception");
  assert.equal(spans.fail.events[0].attributes["exception.type"], "RangeError");
  assert.equal(spans.fail.events[0].attributes["exception.message"], "too far");
  assert.deepEqual(spans.failOdd.status, { code: api.SpanStatusCode.ERROR, message: "Error: a string" });
  assert.equal(spans.failOdd.attributes["error.type"], "Error");
  assert.equal(spans.failOdd.instrumentationScope.name, "clientmcp"); // the default tracer
  for (const span of Object.values(spans)) assert.equal(span.parentSpanContext.spanId, PARENT_ID);
  // The agent still gets the results it would without tracing.
  assert.deepEqual(await resultOf(socket, "fail"), { content: [{ type: "text", text: "RangeError: too far" }], isError: true });
  await mcp.close();
});

test("tracing: a cancelled call's span ends when its handler does, with no error", async () => {
  exporter.reset();
  let started;
  const running = new Promise((resolve) => (started = resolve));
  const { mcp, socket } = await online(
    {
      wait: (args, { signal }) =>
        new Promise((resolve, reject) => {
          signal.addEventListener("abort", () => reject(signal.reason));
          started();
        }),
    },
    { tracing: { api } },
  );
  socket.receive({ type: "call", id: "c1", name: "wait", arguments: {}, traceparent: TRACEPARENT });
  await running;
  socket.receive({ type: "cancel", id: "c1" });
  await waitFor(() => exporter.getFinishedSpans().length === 1, 5000, "the span ended");
  const [span] = exporter.getFinishedSpans();
  assert.deepEqual(span.status, { code: api.SpanStatusCode.UNSET });
  assert.equal(span.attributes["error.type"], undefined);
  assert.deepEqual(span.events, []);
  assert.equal(span.parentSpanContext.spanId, PARENT_ID);
  assert.deepEqual(sentAfterRegister(socket), []); // and no result, as ever after a cancel
  await mcp.close();
});

test("tracing: a call without a valid traceparent gets a span of its own, a new trace", async () => {
  exporter.reset();
  const { mcp, socket } = await online({ look: () => "seen" }, { tracing: { api } });
  const invalid = {
    none: undefined,
    zeros: `00-${"0".repeat(32)}-${PARENT_ID}-01`,
    ff: `ff-${TRACE_ID}-${PARENT_ID}-01`,
    short: `00-${TRACE_ID}-${PARENT_ID}`,
    upper: TRACEPARENT.toUpperCase(),
  };
  for (const [id, traceparent] of Object.entries(invalid)) {
    socket.receive({ type: "call", id, name: "look", arguments: {}, traceparent });
    await resultOf(socket, id);
  }
  const spans = exporter.getFinishedSpans();
  assert.equal(spans.length, 5);
  for (const span of spans) {
    assert.equal(span.parentSpanContext, undefined);
    assert.notEqual(span.spanContext().traceId, TRACE_ID);
  }
  // A later version's traceparent is read as version 00 (W3C Trace Context, §4.3).
  socket.receive({ type: "call", id: "later", name: "look", arguments: {}, traceparent: `01-${TRACE_ID}-${PARENT_ID}-01-what-comes-next` });
  await resultOf(socket, "later");
  assert.equal(exporter.getFinishedSpans().at(-1).parentSpanContext.spanId, PARENT_ID);
  await mcp.close();
});

test("tracing: what is not the OpenTelemetry API or a tracer is refused at construction", () => {
  const refused = { empty: {}, "api {}": { api: {} }, "no getTracer": { api: { trace: {} } }, string: "otel", "a tracer alone": { tracer: provider.getTracer("x") } };
  for (const [what, tracing] of Object.entries(refused)) {
    assert.throws(
      () => new ClientMCP({ url: "ws://bridge.test/connect", token: "t", tracing }),
      (error) => error instanceof TypeError && error.message === "tracing.api must be the @opentelemetry/api module",
      what,
    );
  }
  for (const tracer of [null, provider, {}]) {
    assert.throws(
      () => new ClientMCP({ url: "ws://bridge.test/connect", token: "t", tracing: { api, tracer } }),
      (error) => error instanceof TypeError && error.message === "tracing.tracer must be an OpenTelemetry Tracer",
    );
  }
  assert.doesNotThrow(() => new ClientMCP({ url: "ws://bridge.test/connect", token: "t", tracing: null }));
  assert.doesNotThrow(() => new ClientMCP({ url: "ws://bridge.test/connect", token: "t", tracing: { api, tracer: undefined } }));
});
