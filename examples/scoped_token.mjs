// An app's backend minting an agent token scoped to some tools, with jose (npm), in Node, Deno or Bun
// (docs/configuration.md, Scoped agent tokens):
//
//   export CLIENTMCP_SECRET=...
//   node examples/scoped_token.mjs my-app list_todos 'read_*'
import { SignJWT } from "jose";

export async function scopedAgentToken(secret, clientId, tools, ttl = "1h") {
  return await new SignJWT({ role: "agent", tools })
    .setProtectedHeader({ alg: "HS256", typ: "JWT" })
    .setSubject(clientId)
    .setExpirationTime(ttl)
    .sign(new TextEncoder().encode(secret));
}

const [clientId, ...tools] = process.argv.slice(2);
console.log(await scopedAgentToken(process.env.CLIENTMCP_SECRET, clientId, tools));
