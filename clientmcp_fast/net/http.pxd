# Typed declarations of http.py for its compiled build (Cython pure-Python mode): see setup.py.

from clientmcp_fast.core.agent cimport AgentEndpoint
from clientmcp_fast.core.counters cimport Counters
from clientmcp_fast.core.http cimport Exchange, Request, response_head, response_message

cimport cython

# The bits of the reader's state (speedups), as C numbers.
cdef int EXPECTS_CONTINUE, READING_BODY, READING_HEAD, REFUSED, STOPPED

cdef class HttpExchange(Exchange):
    cdef public HttpProtocol _conn
    cdef public int _state

    cpdef init_exchange(self, HttpProtocol conn, Request request)
    @cython.locals(request=Request, conn=HttpProtocol)
    cpdef respond(self, status, headers, body)
    @cython.locals(request=Request)
    cpdef start_stream(self, headers)
    cpdef stream(self, data)
    @cython.locals(request=Request)
    cpdef end_stream(self)
    cpdef backlog(self)


cdef class HttpProtocol:
    cdef public object server
    cdef public object transport
    cdef public object reader
    cdef public object deadline
    cdef public AgentEndpoint _agents
    cdef public Py_ssize_t _max_pipelined
    cdef public double _head_timeout
    cdef public double _keepalive_timeout
    cdef public object _time
    cdef public int _reading
    cdef public int _phase
    cdef public object _queue
    cdef public HttpExchange _current
    cdef public bint _serving
    cdef public bint _closed
    cdef public bint _pipeline_paused
    cdef public bint _write_paused
    cdef public bint _draining
    cdef public bint _log_requests
    cdef public Counters _counters

    @cython.locals(reading=int)
    cpdef data_received(self, data)
    @cython.locals(reading=int)
    cpdef _arm(self)
    @cython.locals(exchange=HttpExchange)
    cpdef _serve(self)
    @cython.locals(request=Request)
    cpdef _dispatch(self, HttpExchange exchange)
    cpdef bint must_close(self, Request request)
    cpdef write(self, data)
    cpdef finish(self, HttpExchange exchange, data, close)
    cpdef _close(self)
