# Typed declarations of agent_checks.py for its compiled build (Cython pure-Python mode): see setup.py.
# The checks every request runs, as C functions agent.py and agent_modern.py call directly.

cimport cython

from clientmcp_fast.core.events cimport EventLog
from clientmcp_fast.core.memo cimport remember
from clientmcp_fast.core.tokens cimport Grant, TokenVerifier


cpdef str header_text(bytes value, dict known)
cpdef remember_value(dict memo, bytes value, meaning)
cpdef bearer_token(dict cache, bytes authorization)
cpdef authenticate(TokenVerifier verifier, dict cache, exchange, authorization, path_token, cors, now,
                   EventLog events)
@cython.locals(capacity=double, allowance=double, wait=double, seconds=Py_ssize_t)
cpdef Py_ssize_t over_rate(Grant grant, double rate, double now)
cpdef media_accepted(dict cache, accept)
cpdef named_tool(dict cache, mcp_name)
