// A test runner that Node, Deno, Bun and a browser page all accept: nothing but the web platform
// (fetch, timers, WebSocket). The cases of cases.mjs run one after the other; each line of the
// report is TAP ("ok 3 - case: ..." or "not ok 3 - ..." with the error), which
// tests/js/test_js_runtimes.py reads the same way for every runtime.

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** Wait until `predicate()` holds (polled), or fail after `timeout` ms. */
export async function waitFor(predicate, timeout = 10000, what = "the condition") {
  const giveUp = Date.now() + timeout;
  while (!(await predicate())) {
    if (Date.now() > giveUp) throw new Error(`${what} never held within ${timeout} ms`);
    await sleep(10);
  }
}

function show(value) {
  return JSON.stringify(value) ?? String(value);
}

// Plain data only (what JSON carries), which is all the cases compare.
function same(a, b) {
  if (a === b) return true;
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  const keys = Object.keys(a);
  if (keys.length !== Object.keys(b).length) return false;
  return keys.every((key) => Object.hasOwn(b, key) && same(a[key], b[key]));
}

export const assert = {
  ok(value, message = `expected a true value, got ${show(value)}`) {
    if (!value) throw new Error(message);
  },
  equal(actual, expected, what = "") {
    if (actual !== expected) throw new Error(`${what ? what + ": " : ""}expected ${show(expected)}, got ${show(actual)}`);
  },
  deepEqual(actual, expected, what = "") {
    if (!same(actual, expected)) throw new Error(`${what ? what + ": " : ""}expected ${show(expected)}, got ${show(actual)}`);
  },
  match(text, pattern) {
    if (!pattern.test(text)) throw new Error(`expected ${show(text)} to match ${pattern}`);
  },
  async rejects(promise, check) {
    let error;
    try {
      await promise;
    } catch (caught) {
      error = caught ?? new Error("rejected with nothing");
    }
    if (!error) throw new Error("expected a rejection");
    if (check && !check(error)) throw new Error(`the rejection was not the one expected: ${error.message}`);
  },
};

async function post(base, path, args = {}, signal) {
  const response = await fetch(base + path, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(args),
    signal,
  });
  const answer = await response.json();
  if (!response.ok) throw new Error(`${path}: ${answer.error}`);
  return answer;
}

/** A real bridge, run by control.mjs: the API of bridge.mjs's Bridge, with tokens asked for. */
export class RemoteBridge {
  constructor(base, id, connectUrl) {
    this.base = base;
    this.path = `/bridges/${id}`;
    this.connectUrl = connectUrl;
  }

  static async start(base, ...flags) {
    const { id, connectUrl } = await post(base, "/bridges", { flags });
    return new RemoteBridge(base, id, connectUrl);
  }

  async token(role, clientId) {
    return (await post(this.base, `${this.path}/token`, { role, clientId })).token;
  }

  async stop() {
    await post(this.base, `${this.path}/stop`);
  }

  /** SIGTERM and start again on the same port: apps are closed with 1001 meanwhile. */
  async restart() {
    await post(this.base, `${this.path}/restart`);
  }

  /** One JSON-RPC request as an agent of `clientId`; aborting `signal` hangs the agent up. */
  async rpc(clientId, method, params = {}, { signal } = {}) {
    return (await post(this.base, `${this.path}/rpc`, { clientId, method, params }, signal)).result;
  }

  call(clientId, name, args = {}, options) {
    return this.rpc(clientId, "tools/call", { name, arguments: args }, options);
  }

  async toolNames(clientId) {
    return (await this.rpc(clientId, "tools/list")).tools.map((tool) => tool.name);
  }
}

/** Which runtime this is: the one each case may consult for a documented difference. */
export const RUNTIME = globalThis.Deno ? "deno" : globalThis.Bun ? "bun" : globalThis.process?.versions?.node ? "node" : "chromium";

/**
 * Run `cases` ([name, fn] pairs) against the control server at `base`, one by one, each with
 * `timeout` ms; `print` gets each line of TAP. Resolves with the whole report.
 */
export async function run(cases, base, print, timeout = 60000) {
  const lines = [];
  const out = (line) => {
    lines.push(line);
    print(line);
  };
  out(`TAP version 13`);
  out(`# runtime ${RUNTIME}`);
  out(`1..${cases.length}`);
  const context = { base, start: (...flags) => RemoteBridge.start(base, ...flags) };
  let failed = 0;
  for (const [index, [name, fn]] of cases.entries()) {
    let timer;
    try {
      await Promise.race([
        fn(context),
        new Promise((_, reject) => (timer = setTimeout(() => reject(new Error(`timed out after ${timeout} ms`)), timeout))),
      ]);
      out(`ok ${index + 1} - ${name}`);
    } catch (error) {
      failed += 1;
      out(`not ok ${index + 1} - ${name}`);
      for (const line of String(error?.stack ?? error).split("\n")) out(`  # ${line}`);
    } finally {
      clearTimeout(timer);
    }
  }
  out(`# failed ${failed}`);
  return lines.join("\n");
}
