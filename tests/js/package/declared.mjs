// What clientmcp.d.ts declares against what clientmcp.js has at run time, printed as JSON for
// tests/js/test_js_package.py: the exported values (a type or an interface has no run-time
// twin), what kind each is, and the public members of a ClientMCP (those of EventTarget aside).
//   node declared.mjs PACKAGE_DIR
import path from "node:path";
import { pathToFileURL } from "node:url";
import ts from "typescript";

const dir = path.resolve(process.argv[2]);
const program = ts.createProgram([path.join(dir, "clientmcp.d.ts")], { strict: true, lib: ["lib.es2022.d.ts", "lib.dom.d.ts"] });
const checker = program.getTypeChecker();
const source = program.getSourceFile(path.join(dir, "clientmcp.d.ts"));
const exports = checker.getExportsOfModule(checker.getSymbolAtLocation(source));

const kind = (symbol) => (symbol.flags & ts.SymbolFlags.Class ? "class" : symbol.flags & ts.SymbolFlags.Function ? "function" : "value");
const declared = Object.fromEntries(exports.filter((symbol) => symbol.flags & ts.SymbolFlags.Value).map((symbol) => [symbol.name, kind(symbol)]));
const clientClass = exports.find((symbol) => symbol.name === "ClientMCP");
const declaredMembers = [...clientClass.members.keys()].filter((name) => name !== "__constructor");

const module = await import(pathToFileURL(path.join(dir, "clientmcp.js")));
const runtime = Object.fromEntries(
  Object.entries(module).map(([name, value]) => [name, typeof value !== "function" ? "value" : /^class\b/.test(String(value)) ? "class" : "function"]),
);
const inherited = new Set(Object.getOwnPropertyNames(EventTarget.prototype));
const instance = new module.ClientMCP({ url: "ws://127.0.0.1:1/connect", token: "t" });
const runtimeMembers = [...Object.keys(instance), ...Object.getOwnPropertyNames(module.ClientMCP.prototype)].filter(
  (name) => !name.startsWith("_") && name !== "constructor",
);
const sorted = (names) => [...new Set(names)].sort();
console.log(
  JSON.stringify({
    declared,
    runtime,
    declaredMembers: sorted(declaredMembers.filter((name) => !inherited.has(name))),
    runtimeMembers: sorted(runtimeMembers),
  }),
);
