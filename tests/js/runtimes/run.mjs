// The command-line entry of harness.mjs, the same for Node, Deno and Bun:
//   node run.mjs URL | deno run --allow-net run.mjs URL | bun run.mjs URL
// where URL is control.mjs's; exits 0 only if every case passed.
import { run } from "./harness.mjs";
import cases from "./cases.mjs";

const args = globalThis.Deno ? Deno.args : process.argv.slice(2);
const report = await run(cases, args[0], (line) => console.log(line));
const failed = report.includes("\nnot ok ");
if (globalThis.Deno) Deno.exit(failed ? 1 : 0);
else process.exit(failed ? 1 : 0);
