# Typed declarations of agent_legacy.py for its compiled build (Cython pure-Python mode): see setup.py.
# Legacy requests as a C function agent.py, and each element of a batch, call directly.

from clientmcp_fast.core.agent_context cimport Context
from clientmcp_fast.core.agent_tools cimport instructions, tools_call, tools_list
from clientmcp_fast.core.bridge cimport Bridge
from clientmcp_fast.core.http cimport Exchange
from clientmcp_fast.core.jsonrpc cimport valid_id


cpdef serve_legacy(Bridge bridge, Context context, message, params, meta, now)
