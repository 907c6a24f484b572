// The todo app in TypeScript: what the declarations (clientmcp.d.ts) let an app write, and what
// they refuse. tests/js/test_js_package.py type-checks it with `tsc --strict --noEmit`, here and
// in an empty project that installed the packed package; each `@ts-expect-error` line is a
// mistake the declarations must catch (the check fails if one is let through).
import { ClientMCP, accepted, completed, rejected, type ConnectError, type StateChangeEvent } from "clientmcp";

interface Todo {
  id: number;
  title: string;
  done: boolean;
}

export function startTodos(url: string, fetchToken: () => Promise<string>): ClientMCP {
  const todos: Todo[] = [];
  const mcp = new ClientMCP({ url, token: fetchToken, instructions: "A shared todo list.", backoff: [500, 30000] });

  mcp.expose<{ title: string }>("add_todo", {
    description: "Add a todo",
    inputSchema: { type: "object", properties: { title: { type: "string" } }, required: ["title"] },
    risk: "operate",
    handler: ({ title }) => {
      const item = { id: todos.length + 1, title, done: false };
      todos.push(item);
      return completed(`Added #${item.id}: ${title}`, { item });
    },
  });
  mcp.expose("list_todos", { description: "The todos", risk: "observe", handler: () => ({ todos }) });
  mcp.expose<{ id: number }>("complete_todo", {
    description: "Mark a todo as done",
    inputSchema: { type: "object", properties: { id: { type: "integer" } }, required: ["id"] },
    risk: "operate",
    handler: ({ id }) => {
      const item = todos.find((todo) => todo.id === id);
      if (!item) return rejected("not_found", `There is no todo #${id}.`);
      item.done = true;
      return completed(`Done: ${item.title}`, { item });
    },
  });
  mcp.expose("mail_todos", {
    description: "Mail the list",
    risk: "transact",
    annotations: { openWorldHint: true },
    handler: async (args: { to: string }, { signal, report, traceparent }) => {
      // A handler that waits listens to its signal: a cancelled call's result is never sent.
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(resolve, 10);
        signal.addEventListener("abort", () => (clearTimeout(timer), reject(signal.reason)));
      });
      // A long one tells the agent how far it is; the trace context is the agent's, or null.
      report(1, 2, `Mailing to ${args.to}`);
      const trace: string | null = traceparent;
      if (trace !== null) console.log(`mailing as part of trace ${trace.split("-")[1]}`);
      return accepted(`mail-${todos.length}`, `Mailing ${todos.length} todos to ${args.to}.`, { count: todos.length });
    },
  });

  mcp.addEventListener("statechange", (event: StateChangeEvent) => {
    const code: number | null = event.code;
    console.log(`${event.state}${code === null ? "" : ` (${code})`}`);
  });
  mcp.onstatechange = (event) => {
    if (event.state === "replaced") mcp.unexpose("mail_todos");
  };
  mcp.connect({ timeout: null }).catch((error: ConnectError) => console.error(error.code, error.reason, error.message));
  return mcp;
}

// What the declarations refuse.
const mcp = new ClientMCP({ url: "ws://127.0.0.1:8080/connect", token: "eyJ..." });
// @ts-expect-error a risk level the client does not know (a RangeError at run time)
mcp.expose("pay", { risk: "huge", handler: () => "paid" });
// @ts-expect-error a tool needs its handler
mcp.expose("nothing", { description: "No handler" });
// @ts-expect-error `status` belongs to the outcome (a TypeError at run time)
completed("Saved", { status: "ok" });
// @ts-expect-error the state is the client's to set
mcp.state = "online";
// @ts-expect-error a token is a string or a function returning one
new ClientMCP({ url: "ws://127.0.0.1:8080/connect", token: 42 });
// @ts-expect-error the timeout is in milliseconds, a number
mcp.connect({ timeout: "10s" });
// @ts-expect-error progress is a number (a TypeError at run time)
mcp.expose("half", { handler: (args, { report }) => report("half") });
// @ts-expect-error tracing takes the @opentelemetry/api module, not a tracer alone
new ClientMCP({ url: "ws://127.0.0.1:8080/connect", token: "eyJ...", tracing: { tracer: { startActiveSpan: () => 1 } } });
