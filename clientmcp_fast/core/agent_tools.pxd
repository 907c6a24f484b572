# Typed declarations of agent_tools.py for its compiled build (Cython pure-Python mode): see setup.py.
# tools/list and tools/call as C functions both eras call directly.

cimport cython

from clientmcp_fast.core.agent_context cimport Context
from clientmcp_fast.core.bridge cimport Bridge
from clientmcp_fast.core.http cimport Request
from clientmcp_fast.core.tokens cimport Grant, ToolScope
from clientmcp_fast.core.tracing cimport valid_traceparent


cpdef instructions(Bridge bridge, client_id)
@cython.locals(scope=ToolScope)
cpdef tools_list(Bridge bridge, Context context, id_json, params, modern)
@cython.locals(tools=dict, request=Request, grant=Grant, scope=ToolScope, limit=Py_ssize_t, tracing=bint)
cpdef tools_call(Bridge bridge, Context context, id_json, name, params, meta, modern, session, now)
cdef bint _take_progress(Context context, meta, int error_status, id_json)
@cython.locals(request=Request, traceparent=bytes, tracestate=bytes, size=Py_ssize_t)
cdef _take_trace(Context context, meta)
cdef inline bint _blank(unsigned char byte)
cdef _check_trace(Context context, traceparent, tracestate)
