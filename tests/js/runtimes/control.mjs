// The bridges of tests/js/runtimes/cases.mjs, behind HTTP: a browser page cannot start a process,
// and Deno and Bun should not need to, so every runtime asks this server (run on Node 22 by
// tests/js/test_js_runtimes.py) to start, restart and stop real bridges (bridge.mjs), to mint
// tokens, and to call tools as an agent. It also serves the page and the modules Chromium loads,
// which makes the agent's calls same-origin for the page (the bridge sends no CORS headers).
//
//   node control.mjs   -> prints "control on http://127.0.0.1:PORT", serves until killed
import { readFile } from "node:fs/promises";
import http from "node:http";
import path from "node:path";
import { fileURLToPath } from "node:url";

import { Bridge } from "../bridge.mjs";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../..");
// What the page may load, and nothing else of the repository.
const SERVED = ["sdk/js/clientmcp.js", "tests/js/runtimes/harness.mjs", "tests/js/runtimes/cases.mjs"];
const PAGE = `<!doctype html>
<meta charset="utf-8">
<title>clientmcp on Chromium</title>
<script type="module">
  import { run } from "/tests/js/runtimes/harness.mjs";
  import cases from "/tests/js/runtimes/cases.mjs";
  // Read by the test through Playwright once it settles: the TAP text of the run.
  window.finished = run(cases, location.origin, (line) => console.log(line));
</script>
`;

const bridges = new Map();
let next = 0;

async function body(request) {
  let text = "";
  for await (const chunk of request) text += chunk;
  return text ? JSON.parse(text) : {};
}

function send(response, status, value, type = "application/json") {
  const text = type === "application/json" ? JSON.stringify(value) : value;
  response.writeHead(status, { "Content-Type": type, "Cache-Control": "no-store" });
  response.end(text);
}

async function handle(request, response) {
  const url = new URL(request.url, "http://control");
  if (request.method === "GET" && url.pathname === "/page") return send(response, 200, PAGE, "text/html; charset=utf-8");
  if (request.method === "GET" && SERVED.includes(url.pathname.slice(1))) {
    return send(response, 200, await readFile(path.join(ROOT, url.pathname.slice(1)), "utf8"), "text/javascript; charset=utf-8");
  }
  if (request.method !== "POST") return send(response, 404, { error: "not found" });
  const args = await body(request);
  if (url.pathname === "/bridges") {
    const bridge = await Bridge.start(...(args.flags ?? []));
    const id = String(++next);
    bridges.set(id, bridge);
    return send(response, 200, { id, connectUrl: bridge.connectUrl });
  }
  const [, id, action] = url.pathname.match(/^\/bridges\/(\d+)\/(\w+)$/) ?? [];
  const bridge = bridges.get(id);
  if (!bridge) return send(response, 404, { error: `no bridge ${url.pathname}` });
  if (action === "stop") await bridge.stop();
  else if (action === "restart") await bridge.restart();
  else if (action === "token") return send(response, 200, { token: bridge.token(args.role, args.clientId) });
  else if (action === "rpc") {
    // The runtime's agent hangs up: so does this one, and the bridge sends the app `cancel`.
    const upstream = new AbortController();
    response.on("close", () => response.writableFinished || upstream.abort());
    return send(response, 200, { result: await bridge.rpc(args.clientId, args.method, args.params, { signal: upstream.signal }) });
  } else return send(response, 404, { error: `no action ${action}` });
  return send(response, 200, {});
}

const server = http.createServer((request, response) => {
  handle(request, response).catch((error) => {
    if (!response.headersSent) send(response, 500, { error: String(error?.stack ?? error) });
  });
});
server.listen(0, "127.0.0.1", () => console.log(`control on http://127.0.0.1:${server.address().port}`));
for (const signal of ["SIGTERM", "SIGINT"]) process.on(signal, () => process.exit(0)); // bridge.mjs kills its bridges on exit
