# Typed declarations of agent.py for its compiled build (Cython pure-Python mode): see setup.py.

cimport cython

from clientmcp_fast.core.bridge cimport Bridge
from clientmcp_fast.core.calls cimport Call
from clientmcp_fast.core.channel cimport AppChannel
from clientmcp_fast.core.http cimport Exchange, Request
from clientmcp_fast.core.tokens cimport TokenVerifier
from clientmcp_fast.core.jsonrpc cimport decode_body, valid_id


cpdef str _header_text(bytes value, dict known)
cpdef _remember(dict memo, bytes value, meaning)


cdef class _Context(Call):
    cdef public Exchange exchange
    cdef public object client_id
    cdef public object cors
    cdef public bint json_ok
    cdef public Bridge bridge
    cdef public object id_json
    cdef public bint modern
    cdef public object session

    cpdef init_context(self, Exchange exchange, client_id, cors, bint json_ok, bint sse_named)
    cpdef reply(self, body, extra=*)
    cpdef fail(self, status, id_json, code, message, data=*)
    cpdef accepted(self)
    cpdef start_call(self, Bridge bridge, app, tool, arguments, modern, id_json, session, now)
    cpdef _finish(self, body)


cdef class AgentEndpoint:
    cdef public Bridge bridge
    cdef public TokenVerifier verifier
    cdef public object allowed_origins
    cdef public dict _accept_cache
    cdef public dict _bearer_cache
    cdef public dict _name_cache

    @cython.locals(request=Request, method=bytes, body=bytes, context=_Context)
    cpdef handle(self, Exchange exchange, path_token, now)
    @cython.locals(cache=dict)
    cpdef _authenticate(self, exchange, authorization, path_token, cors, now)
    @cython.locals(request=Request)
    cpdef _route(self, _Context context, message, now)
    cpdef _legacy(self, _Context context, message, params, version, now)
    @cython.locals(request=Request, cache=dict)
    cpdef _modern(self, _Context context, message, params, meta, header_version, body_version, now)
    @cython.locals(app=AppChannel, tools=dict, request=Request)
    cpdef _call(self, _Context context, id_json, name, params, modern, session, now)
