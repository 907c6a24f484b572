"""An app's backend minting a client token with the current generation (docs/configuration.md, Revocation).

The bridge runs with `--state` (or CLIENTMCP_STATE); the backend shares its secret and reads
the generation from the same file, then signs with any JWT library (PyJWT here):

export CLIENTMCP_SECRET=... CLIENTMCP_STATE=/var/lib/clientmcp/state.db
python examples/backend_token.py my-app
"""

import os
import sqlite3
import sys
import time

import jwt


def client_token(secret: str, state: str, client_id: str, ttl: int = 86400) -> str:
    db = sqlite3.connect(state)
    try:
        row = db.execute(
            "SELECT gen FROM generations WHERE role = ? AND client_id = ?", ("client", client_id)
        ).fetchone()
    finally:
        db.close()
    claims = {"sub": client_id, "role": "client", "exp": int(time.time()) + ttl, "gen": row[0] if row else 0}
    return jwt.encode(claims, secret, algorithm="HS256")


if __name__ == "__main__":
    client_id = sys.argv[1] if len(sys.argv) > 1 else "my-app"
    print(client_token(os.environ["CLIENTMCP_SECRET"], os.environ["CLIENTMCP_STATE"], client_id))
