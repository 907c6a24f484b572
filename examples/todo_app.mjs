// A todo app that lets AI agents add to its list, through a ClientMCP bridge: the JavaScript client.
//
// Run it beside a bridge (`clientmcp serve`, as the README's "Run a bridge" says), with Node 22+:
//
// export CLIENTMCP_CLIENT_TOKEN=$(clientmcp token client my-app)
// node examples/todo_app.mjs
//
// CLIENTMCP_CONNECT_URL names another bridge than ws://127.0.0.1:8080/connect. In a browser the
// same code runs unchanged, with the token from the app's backend (ClientMCP v1 §7). The client
// is the package of sdk/js: an app installs it (`npm install clientmcp`); in this repository,
// `npm ci` links it as node_modules/clientmcp.
import { ClientMCP, completed } from "clientmcp";

const todos = [];

const url = process.env.CLIENTMCP_CONNECT_URL ?? "ws://127.0.0.1:8080/connect";
const mcp = new ClientMCP({ url, token: process.env.CLIENTMCP_CLIENT_TOKEN });
mcp.expose("add_todo", {
  description: "Add a todo",
  inputSchema: { type: "object", properties: { title: { type: "string" } }, required: ["title"] },
  risk: "operate",
  handler: ({ title }) => {
    todos.push(title);
    return completed(`Added ${title}`, { count: todos.length });
  },
});
await mcp.connect(); // connects, registers, answers calls until closed
console.log(`Connected to ${url} with the tool add_todo; Ctrl-C stops.`);
process.on("SIGINT", () => mcp.close().then(() => process.exit(0)));
