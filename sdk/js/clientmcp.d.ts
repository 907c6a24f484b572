// The declarations of clientmcp.js, written by hand. tests/js/test_js_package.py type-checks a
// typed app against them with `tsc --strict` and compares every name declared here, and every
// public member of ClientMCP, with what the module has at run time: a change to one without the
// other fails there.

/** The WebSocket subprotocol an app offers, beside its token (ClientMCP v1 §4). */
export declare const SUBPROTOCOL: "clientmcp.v1";
/** The exact text of a ping (ClientMCP v1 §3.2). */
export declare const PING: '{"type":"ping"}';
/** The `_meta` key that carries a tool's risk level. */
export declare const RISK_META: "io.github.clientmcp/risk";
/** The largest message either side sends: 4 MiB (ClientMCP v1 §3.2). */
export declare const MAX_MESSAGE_BYTES: number;
/** The longest message a progress report carries, in characters (code points): 1024. */
export declare const MAX_PROGRESS_MESSAGE_CHARS: 1024;

/** How much a tool's action matters, on the app's own scale. */
export type Risk = "observe" | "operate" | "manage" | "transact";

/** The MCP tool annotations (hints to agents, never enforced). */
export interface ToolAnnotations {
  title?: string;
  readOnlyHint?: boolean;
  destructiveHint?: boolean;
  idempotentHint?: boolean;
  openWorldHint?: boolean;
  [key: string]: unknown;
}

/** The MCP annotations each risk level implies. */
export declare const RISK_ANNOTATIONS: Readonly<Record<Risk, Readonly<ToolAnnotations>>>;
/** What each close code says happened, in words. */
export declare const CLOSE_MEANINGS: Readonly<Record<number, string>>;

/** A close in words: `closed with 4401 (the token was refused): bad signature`. */
export declare function describeClose(code: number, reason?: string): string;
/** Why no reconnect follows a close with `code`, or null if one does. */
export declare function noReconnectReason(code: number | null, tokenIsFunction: boolean): string | null;

/** One block of a tool's result (MCP's ContentBlock); text is the common one. */
export type ContentBlock =
  | { type: "text"; text: string; [key: string]: unknown }
  | { type: string; [key: string]: unknown };

/** MCP's CallToolResult, what an agent gets for a call. */
export interface CallToolResult {
  content: ContentBlock[];
  structuredContent?: { [key: string]: unknown };
  isError?: boolean;
  _meta?: { [key: string]: unknown };
  [key: string]: unknown;
}

/** The app's own data of an outcome: any members but the outcome's (a TypeError at run time). */
export type OutcomeData = { [key: string]: unknown } & { status?: never; operation?: never; reason?: never };

export interface CompletedResult extends CallToolResult {
  structuredContent: { status: "completed"; [key: string]: unknown };
}
export interface AcceptedResult extends CallToolResult {
  structuredContent: { status: "accepted"; operation: string; [key: string]: unknown };
}
export interface RejectedResult extends CallToolResult {
  isError: true;
  structuredContent: { status: "rejected"; reason: { code: string; detail: string }; [key: string]: unknown };
}

/** A CallToolResult with one text block. */
export declare function textResult(text: string, options?: { isError?: boolean }): CallToolResult;
/** Outcome `completed`: the change holds, seen in the app's own state. */
export declare function completed(message?: string, data?: OutcomeData): CompletedResult;
/** Outcome `accepted`: it started and goes on as `operation`, reported through the app's own tools. */
export declare function accepted(operation: string, message?: string, data?: OutcomeData): AcceptedResult;
/** Outcome `rejected`: nothing changed; `code` is for the agent to act on, `detail` for a reader. */
export declare function rejected(code: string, detail: string, data?: OutcomeData): RejectedResult;
/** A handler's return value as the CallToolResult the agent gets. */
export declare function asResult(value: unknown): CallToolResult;
/** The tool error a thrown value becomes: `TypeError: x is not a function`. */
export declare function errorResult(error: unknown): CallToolResult;

/** What a page can show: `offline`, `connecting`, `online`, or `replaced` (4409, for good). */
export type State = "offline" | "connecting" | "online" | "replaced";
export declare const STATES: readonly State[];

/** A client token, or a function (plain or async) called before every connection attempt. */
export type Token = string | (() => string | Promise<string>);

/** The timers the client runs on; tests give a fake one. */
export interface Clock {
  now(): number;
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(id: any): void;
}

/** What a WebSocket class must offer the client: the standard constructor, events and methods. */
export interface WebSocketLike {
  onopen: ((event: any) => void) | null;
  onmessage: ((event: { data: any }) => void) | null;
  onerror: ((event: any) => void) | null;
  onclose: ((event: { code: number; reason: string }) => void) | null;
  send(data: string): void;
  close(code?: number, reason?: string): void;
}
export type WebSocketClass = new (url: string, protocols: string[]) => WebSocketLike;

export interface ClientMCPOptions {
  /** The bridge's `ws://HOST:PORT/connect` (`wss://` behind TLS). */
  url: string;
  /** A client token, or a function returning one, called before every connection attempt. */
  token: Token;
  /** Sent with every register; agents get it as the server's instructions. */
  instructions?: string;
  /** Answers an OAuth client's request to use this app; set, the app registers `consent` (docs/oauth.md). */
  onAuthorize?: AuthorizeHandler | null;
  /** Milliseconds without sending after which a ping goes (25000). */
  pingInterval?: number;
  /** Milliseconds after a ping with nothing heard before the link counts as dead (10000). */
  pongTimeout?: number;
  /** Reconnect after a connection ends or an attempt fails (true). */
  reconnect?: boolean;
  /** First and longest wait between attempts, ms ([500, 30000]); starts over only after a connection stayed registered the longest wait. */
  backoff?: [first: number, longest: number];
  /** The timers to run on (performance.now and setTimeout); for tests. */
  clock?: Clock;
  /** A number in [0, 1) for the backoff's jitter (Math.random). */
  random?: () => number;
  /** The WebSocket class (globalThis.WebSocket). */
  WebSocket?: WebSocketClass;
  /** OpenTelemetry: each call's handler runs in a span `execute_tool <name>`, a child of the agent's trace when the call carries one. */
  tracing?: TracingOptions | null;
}

/**
 * What the client uses of the `@opentelemetry/api` module (it imports nothing itself): pass
 * the module, `import * as api from "@opentelemetry/api"`.
 */
export interface OpenTelemetryAPI {
  trace: {
    getTracer(name: string, version?: string): Tracer;
    setSpanContext(context: any, spanContext: any): any;
    isSpanContextValid(spanContext: any): boolean;
  };
  ROOT_CONTEXT: unknown;
  SpanKind: { INTERNAL: number };
  SpanStatusCode: { ERROR: number };
  createTraceState(rawTraceState?: string): unknown;
}
/** An OpenTelemetry Tracer: the client calls `startActiveSpan(name, options, context, fn)`. */
export interface Tracer {
  startActiveSpan(...args: any[]): any;
}
export interface TracingOptions {
  /** The `@opentelemetry/api` module. */
  api: OpenTelemetryAPI;
  /** The tracer the spans come from (`api.trace.getTracer("clientmcp")`). */
  tracer?: Tracer;
}

/** An OAuth client asks to use this app's tools (the bridge's `authorize`): show it to the user, with the code. */
export interface AuthorizeRequest {
  /** The request's id, as the bridge sent it. */
  id: string;
  /** The name the client registered, which it chooses itself (null if it gave none): show the origin too. */
  clientName: string | null;
  /** Where the client gets its answer: `https://host`, `http://127.0.0.1:PORT`, `cursor:`. */
  clientOrigin: string;
  /** The 8 characters the user types into the bridge's consent page. */
  code: string;
}
/** True allows the request; false, a throw or a rejection denies it. */
export type AuthorizeHandler = (request: AuthorizeRequest) => boolean | Promise<boolean>;

/** What a handler gets beside the arguments. */
export interface CallContext {
  /** Aborts when the bridge cancels the call (the agent gave up, or it timed out) or the connection ends. */
  signal: AbortSignal;
  /**
   * Tell the agent how far the call is: `progress` greater each time, out of `total` if known, with
   * a `message` of at most 1024 characters. The bridge passes at most 10 a second on (the latest
   * wins) to an agent that asked; nothing once the call ended. A wrong argument throws TypeError
   * (a message too long, RangeError).
   */
  report(progress: number, total?: number, message?: string): void;
  /** The W3C `traceparent` of the agent's request (or of the bridge's span), or null. */
  traceparent: string | null;
  /** The W3C `tracestate` that came with `traceparent`, or null. */
  tracestate: string | null;
}

/**
 * A tool's function: its return value becomes the result (a CallToolResult as it is, a string
 * as text, undefined or null as `Done.`, a plain object as JSON text and structuredContent);
 * what it throws becomes a tool error `Name: message`.
 */
export type Handler<Args = any> = (args: Args, context: CallContext) => unknown;

/** A JSON Schema for a tool's arguments, an object schema at its root (MCP). */
export interface InputSchema {
  type: "object";
  properties?: { [name: string]: unknown };
  required?: string[];
  [key: string]: unknown;
}

export interface ToolOptions<Args = any> {
  handler: Handler<Args>;
  description?: string;
  /** `{ type: "object" }` unless given. */
  inputSchema?: InputSchema;
  /** Sets `_meta["io.github.clientmcp/risk"]` and the annotations it implies; another value throws RangeError. */
  risk?: Risk;
  /** Merged over what `risk` implies. */
  annotations?: ToolAnnotations;
  /** Merged with the risk level. */
  _meta?: { [key: string]: unknown };
  title?: string;
  outputSchema?: { [key: string]: unknown };
  /** Any other member goes into the tool definition as given. */
  [member: string]: unknown;
}

/** A tool as registered with the bridge (ClientMCP v1 §3.2). */
export interface ToolDefinition {
  name: string;
  description?: string;
  inputSchema: InputSchema;
  annotations?: ToolAnnotations;
  _meta?: { [key: string]: unknown };
  [member: string]: unknown;
}

/** The `statechange` event: the new state, and the last close's code and reason. */
export interface StateChangeEvent extends Event {
  readonly type: "statechange";
  readonly state: State;
  readonly code: number | null;
  readonly reason: string;
}

/** Why `connect()` failed: the close's code and reason when the bridge refused (4400, 4401, 4409). */
export interface ConnectError extends Error {
  code: number | null;
  reason: string;
}

export declare class ClientMCP extends EventTarget {
  constructor(options: ClientMCPOptions);

  readonly url: string;
  instructions: string | undefined;
  pingInterval: number;
  pongTimeout: number;
  reconnect: boolean;
  backoff: [first: number, longest: number];
  /** The declared tools by name. */
  readonly tools: Map<string, { definition: ToolDefinition; handler: Handler }>;
  readonly state: State;
  /** The last close's code, null until a connection closed. */
  readonly closeCode: number | null;
  readonly closeReason: string;
  /** The last failure to connect, or the last close, in words; null while all is well. */
  readonly lastError: string | null;
  /** The calls the bridge cancelled. */
  readonly callsCancelled: number;
  /** The connection attempts since `connect()`. */
  readonly attempts: number;
  /** Called with every `statechange` event, as a listener of it would be. */
  onstatechange: ((event: StateChangeEvent) => void) | null;
  /** Answers OAuth clients' requests (`authorize`); setting or clearing it while online registers again. */
  onAuthorize: AuthorizeHandler | null;

  /** Declare (or replace) a tool; while connected the whole new set is registered at once. */
  expose<Args = any>(name: string, tool: ToolOptions<Args>): this;
  /** Withdraw a tool; while connected the whole new set is registered at once. */
  unexpose(name: string): this;
  /** The register message declaring the current tool set, as sent. */
  registerMessage(): string;
  /**
   * Connect and register; resolves once the bridge answered `registered`. Retries with the
   * backoff until `timeout` ms (10000; null: as long as it takes). Rejects with a ConnectError.
   */
  connect(options?: { timeout?: number | null }): Promise<void>;
  /** Close the connection (1000) and stop reconnecting. */
  close(): Promise<void>;

  addEventListener(
    type: "statechange",
    listener: ((event: StateChangeEvent) => void) | { handleEvent(event: StateChangeEvent): void } | null,
    options?: boolean | AddEventListenerOptions,
  ): void;
  addEventListener(type: string, listener: EventListenerOrEventListenerObject | null, options?: boolean | AddEventListenerOptions): void;
  removeEventListener(
    type: "statechange",
    listener: ((event: StateChangeEvent) => void) | { handleEvent(event: StateChangeEvent): void } | null,
    options?: boolean | EventListenerOptions,
  ): void;
  removeEventListener(type: string, listener: EventListenerOrEventListenerObject | null, options?: boolean | EventListenerOptions): void;
}
