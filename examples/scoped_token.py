"""An app's backend minting an agent token scoped to some tools (docs/configuration.md, Scoped agent tokens).

The backend shares the bridge's secret and signs with any JWT library (PyJWT here); the
`tools` claim names the tools the agent may see and call, exactly or by a prefix and `*`:

export CLIENTMCP_SECRET=...
python examples/scoped_token.py my-app list_todos 'read_*'
"""

import os
import sys
import time

import jwt


def scoped_agent_token(secret: str, client_id: str, tools: list[str], ttl: int = 3600) -> str:
    claims = {"sub": client_id, "role": "agent", "exp": int(time.time()) + ttl, "tools": tools}
    return jwt.encode(claims, secret, algorithm="HS256")


if __name__ == "__main__":
    print(scoped_agent_token(os.environ["CLIENTMCP_SECRET"], sys.argv[1], sys.argv[2:]))
