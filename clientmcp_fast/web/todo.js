// The shared todo list of the ClientMCP demo: one implementation of each action, called by the
// page's buttons for people and by agents through ClientMCP (docs/apps.md, The browser demo).
import { ClientMCP, completed, rejected } from "./clientmcp.js";

const QUESTION_TIMEOUT_MS = 100_000; // shorter than the bridge's call timeout (ClientMCP v1 §9.1)
const REQUEST_LIFETIME_MS = 600_000; // the bridge ends a request to connect after 10 minutes (docs/oauth.md)
const STORAGE_KEY = "clientmcp-demo-todos";

// -- the state, and the actions both the page and agents use ---------------------------------

const saved = JSON.parse(localStorage.getItem(STORAGE_KEY) ?? "null");
const todos = saved?.items ?? [];
let nextId = saved?.nextId ?? 1;
const byAgent = new Set(); // ids of the todos an agent added, marked in the list

function save() {
  localStorage.setItem(STORAGE_KEY, JSON.stringify({ items: todos, nextId }));
  render();
}

function addTodo(title) {
  const item = { id: nextId++, title, done: false };
  todos.push(item);
  save();
  return item;
}

function completeTodo(id) {
  const item = todos.find((todo) => todo.id === id);
  if (item) {
    item.done = true;
    save();
  }
  return item;
}

function clearDone() {
  const before = todos.length;
  todos.splice(0, todos.length, ...todos.filter((todo) => !todo.done));
  save();
  return before - todos.length;
}

// -- asking the user, for agents' calls of consequence (risk "manage") ------------------------

const questions = []; // { text, resolve, signal }: shown one at a time, oldest first

function askTheUser(text, signal) {
  return new Promise((resolve) => {
    const question = { text, resolve, signal };
    const withdraw = () => {
      remove(question);
      resolve("withdrawn");
    };
    const timer = setTimeout(() => {
      remove(question);
      resolve("timeout");
    }, QUESTION_TIMEOUT_MS);
    question.done = () => {
      clearTimeout(timer);
      signal.removeEventListener("abort", withdraw);
    };
    signal.addEventListener("abort", withdraw, { once: true });
    questions.push(question);
    activity("An agent is waiting for your answer.");
    showQuestion();
  });
}

function remove(question) {
  question.done();
  questions.splice(questions.indexOf(question), 1);
  showQuestion();
}

function answer(yes) {
  const question = questions[0];
  if (!question) return;
  remove(question);
  question.resolve(yes ? "yes" : "no");
}

// -- asking the user, for MCP hosts that sign in with OAuth (`clientmcp demo --oauth`) ---------

// A request shows in the page, never in a dialog: the code must stay readable while the user
// types it into the host's sign-in page, and several requests can wait side by side. Names and
// origins come from the requesting client, so they are set as text only.
function askToConnect(request) {
  return new Promise((resolve) => {
    const card = document.getElementById("request-template").content.firstElementChild.cloneNode(true);
    const name = request.clientName || "an unnamed client";
    card.querySelector(".client").textContent = request.clientName || "An unnamed client";
    card.querySelector(".origin").textContent = request.clientOrigin;
    card.querySelector(".code").textContent = request.code;
    let answered = false;
    const decide = (allow) => {
      answered = true;
      resolve(allow);
    };
    // The bridge has ended the request by then, allowed or not: the card goes.
    const timer = setTimeout(() => {
      card.remove();
      if (!answered) activity(`The request of ${name} expired.`);
      decide(false);
    }, REQUEST_LIFETIME_MS);
    card.querySelector(".allow").addEventListener("click", () => {
      decide(true);
      activity(`You allowed ${name}.`);
      // The code stays: the user may not have typed it yet.
      const note = document.createElement("p");
      note.className = "answered";
      note.textContent = "Allowed. Type the code into the sign-in page, if you have not yet.";
      const hide = document.createElement("button");
      hide.type = "button";
      hide.className = "secondary";
      hide.textContent = "Hide";
      hide.addEventListener("click", () => {
        clearTimeout(timer);
        card.remove();
      });
      card.querySelector(".answers").replaceChildren(hide);
      card.querySelector(".answers").before(note);
    });
    card.querySelector(".deny").addEventListener("click", () => {
      clearTimeout(timer);
      card.remove();
      decide(false);
      activity(`You denied ${name}.`);
    });
    document.getElementById("requests").append(card);
  });
}

// -- what agents see --------------------------------------------------------------------------

const params = await (await fetch("config.json")).json();
const mcp = new ClientMCP({
  url: params.url,
  // A token function: called for every connection, so a short-lived token is fetched each
  // time from the app's backend (here the demo's /token; ClientMCP v1 §7).
  token: async () => (await fetch("token", { cache: "no-store" })).text(),
  instructions: "A shared todo list. Items have an integer id and a title.",
  // Only when the bridge runs OAuth: the app then registers `consent` (docs/oauth.md).
  onAuthorize: params.oauth ? askToConnect : null,
});

mcp.expose("add_todo", {
  description: "Add a todo",
  inputSchema: { type: "object", properties: { title: { type: "string" } }, required: ["title"] },
  risk: "operate",
  handler: ({ title }) => {
    if (typeof title !== "string" || !title.trim()) return rejected("invalid_title", "title must be a non-empty string");
    const item = addTodo(title.trim());
    byAgent.add(item.id);
    activity(`An agent added “${item.title}”.`);
    render(item.id);
    return completed(`Added #${item.id}: ${item.title}`, { item });
  },
});

mcp.expose("list_todos", {
  description: "List the todos",
  risk: "observe",
  handler: () => {
    const lines = todos.map((todo) => `#${todo.id} [${todo.done ? "x" : " "}] ${todo.title}`);
    return { content: [{ type: "text", text: lines.join("\n") || "(empty)" }], structuredContent: { items: todos } };
  },
});

mcp.expose("complete_todo", {
  description: "Mark a todo as done",
  inputSchema: { type: "object", properties: { id: { type: "integer" } }, required: ["id"] },
  risk: "operate",
  handler: ({ id }) => {
    if (!Number.isInteger(id)) return rejected("invalid_id", "id must be an integer");
    const item = completeTodo(id);
    if (!item) return rejected("not_found", `there is no todo #${id}`);
    activity(`An agent completed “${item.title}”.`);
    return completed(`Completed #${id}`, { item });
  },
});

mcp.expose("clear_done", {
  description: "Remove completed todos; the user is asked first",
  risk: "manage",
  handler: async (args, { signal }) => {
    const done = todos.filter((todo) => todo.done).length;
    if (done === 0) return completed("Removed 0 completed todos", { removed: 0 });
    const said = await askTheUser(`An agent asks to remove ${done} completed todo${done === 1 ? "" : "s"}. Allow it?`, signal);
    if (said === "withdrawn") return rejected("cancelled", "the call was cancelled before the user answered");
    if (said === "timeout") return rejected("no_answer", `the user did not answer within ${QUESTION_TIMEOUT_MS / 1000} s`);
    if (said === "no") {
      activity("You declined to clear the done todos.");
      return rejected("denied", "the user said no");
    }
    const removed = clearDone();
    activity(`Removed ${removed} completed todo${removed === 1 ? "" : "s"}, as an agent asked.`);
    return completed(`Removed ${removed} completed todos`, { removed });
  },
});

// -- the page ---------------------------------------------------------------------------------

const $ = (id) => document.getElementById(id);

function render(fresh) {
  const list = $("todos");
  list.replaceChildren(
    ...todos.map((todo) => {
      const row = document.createElement("li");
      row.className = (todo.done ? "done" : "") + (todo.id === fresh ? " fresh" : "");
      row.dataset.id = todo.id;
      const box = document.createElement("input");
      box.type = "checkbox";
      box.checked = todo.done;
      box.disabled = todo.done;
      box.setAttribute("aria-label", `Done: ${todo.title}`);
      box.addEventListener("change", () => completeTodo(todo.id));
      const title = document.createElement("span");
      title.className = "title";
      title.textContent = todo.title;
      row.append(box, title);
      if (byAgent.has(todo.id)) {
        const by = document.createElement("span");
        by.className = "by";
        by.textContent = "added by an agent";
        row.append(by);
      }
      return row;
    }),
  );
  $("empty").hidden = todos.length > 0;
  $("clear").disabled = !todos.some((todo) => todo.done);
}

function showQuestion() {
  const question = questions[0];
  $("question").hidden = !question;
  $("question-text").textContent = question ? question.text : "";
}

function activity(text) {
  $("activity").textContent = text;
}

const STATE_TEXT = {
  online: "online",
  connecting: "connecting…",
  offline: "offline",
  replaced: "replaced",
};

mcp.addEventListener("statechange", (event) => {
  const state = $("state");
  state.textContent = STATE_TEXT[event.state];
  state.className = `state ${event.state}`;
  if (event.state === "replaced") activity("This list was opened in another tab, which agents now use. Reload to take it back.");
});

$("add").addEventListener("submit", (event) => {
  event.preventDefault();
  const input = $("title");
  const title = input.value.trim();
  if (title) addTodo(title);
  input.value = "";
});
$("clear").addEventListener("click", () => clearDone());
$("yes").addEventListener("click", () => answer(true));
$("no").addEventListener("click", () => answer(false));

render();
// For the page's own reader and for tests: the client, to look at from the console.
window.clientmcp = mcp;
mcp.connect({ timeout: null }).catch((error) => activity(`Not connected: ${error.message}`));
