# Typed declarations of agent.py for its compiled build (Cython pure-Python mode): see setup.py.

cimport cython

from clientmcp_fast.core.agent_checks cimport authenticate, bearer_token, header_text, media_accepted, over_rate
from clientmcp_fast.core.agent_context cimport Context
from clientmcp_fast.core.agent_legacy cimport serve_legacy
from clientmcp_fast.core.agent_modern cimport serve_modern
from clientmcp_fast.core.bridge cimport Bridge
from clientmcp_fast.core.http cimport Exchange, Request
from clientmcp_fast.core.tokens cimport Grant, TokenVerifier
from clientmcp_fast.core.jsonrpc cimport decode_body, valid_id


cdef class AgentEndpoint:
    cdef public Bridge bridge
    cdef public TokenVerifier verifier
    cdef public object allowed_origins
    cdef public dict _accept_cache
    cdef public dict _bearer_cache
    cdef public dict _name_cache
    cdef public double agent_rate

    @cython.locals(request=Request, method=bytes, grant=Grant)
    cpdef handle(self, Exchange exchange, path_token, now)
    @cython.locals(request=Request, grant=Grant)
    cpdef bint handle_resource(self, Exchange exchange, bytes app_id, now)
    @cython.locals(method=bytes, body=bytes, context=Context, rate=double)
    cpdef _serve(self, Exchange exchange, Request request, Grant grant, cors, now)
    @cython.locals(request=Request)
    cpdef _route(self, Context context, message, now)
