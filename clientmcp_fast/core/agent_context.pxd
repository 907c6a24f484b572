# Typed declarations of agent_context.py for its compiled build (Cython pure-Python mode): see setup.py.
# Every attribute of __slots__ is declared here, public so Python code sees what it saw before.

from clientmcp_fast.core.agent_streams cimport sse_event
from clientmcp_fast.core.bridge cimport Bridge
from clientmcp_fast.core.calls cimport Call
from clientmcp_fast.core.http cimport Exchange
from clientmcp_fast.core.tokens cimport Grant


cdef class Context(Call):
    cdef public Exchange exchange
    cdef public object cors
    cdef public bint json_ok
    cdef public Bridge bridge
    cdef public object id_json
    cdef public object session

    cpdef init_context(self, Exchange exchange, Grant grant, cors, bint json_ok, bint sse_named)
    cpdef reply(self, body, extra=*)
    cpdef fail(self, status, id_json, code, message, data=*)
    cpdef too_many(self, id_json, retry_after, message)
    cpdef accepted(self)
    cpdef start_call(self, Bridge bridge, app, tool, arguments, modern, id_json, session, now)
    cpdef bint named_by_cancel(self, request_id, session)
    cpdef _finish(self, body)
