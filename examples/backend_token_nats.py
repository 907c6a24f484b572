"""A backend minting a client token with a cluster's generation (docs/configuration.md, Generations in a cluster).

The bridges run with `--state nats` (CLIENTMCP_STATE=nats); the backend shares their secret,
reads the generation from the JetStream bucket with nats-py, then signs with any JWT library
(PyJWT here):

export CLIENTMCP_SECRET=... CLIENTMCP_NATS=nats://127.0.0.1:4222
python examples/backend_token_nats.py my-app
"""

import asyncio
import os
import sys
import time

import jwt
import nats
from nats.js.errors import KeyNotFoundError


async def current_generation(servers: str, role: str, client_id: str) -> int:
    nc = await nats.connect(servers.split(","))
    try:
        bucket = await nc.jetstream().key_value("clientmcp_generations")
        try:
            entry = await bucket.get(f"{role}.{client_id.encode().hex()}")  # the key: role.<hex of the ID>
        except KeyNotFoundError:  # never raised, or deleted: generation 0
            return 0
        return int(entry.value)
    finally:
        await nc.close()


def client_token(secret: str, servers: str, client_id: str, ttl: int = 86400) -> str:
    generation = asyncio.run(current_generation(servers, "client", client_id))
    claims = {"sub": client_id, "role": "client", "exp": int(time.time()) + ttl, "gen": generation}
    return jwt.encode(claims, secret, algorithm="HS256")


if __name__ == "__main__":
    client_id = sys.argv[1] if len(sys.argv) > 1 else "my-app"
    print(client_token(os.environ["CLIENTMCP_SECRET"], os.environ["CLIENTMCP_NATS"], client_id))
