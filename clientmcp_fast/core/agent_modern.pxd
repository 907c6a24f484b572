# Typed declarations of agent_modern.py for its compiled build (Cython pure-Python mode): see setup.py.
# The modern ladder as a C function agent.py calls directly.

cimport cython

from clientmcp_fast.core.agent_checks cimport header_text, named_tool
from clientmcp_fast.core.agent_context cimport Context
from clientmcp_fast.core.agent_tools cimport instructions, tools_call, tools_list
from clientmcp_fast.core.bridge cimport Bridge
from clientmcp_fast.core.http cimport Request
from clientmcp_fast.core.jsonrpc cimport valid_id


@cython.locals(request=Request)
cpdef serve_modern(
    Bridge bridge, dict name_cache, Context context, message, params, meta, header_version, body_version, now
)
