# Typed declarations of log_lines.py for its compiled build (Cython pure-Python mode): see setup.py.

cimport cython

from clientmcp_fast.core.agent_context cimport Context
from clientmcp_fast.core.bridge cimport CallLog as BridgeCallLog


@cython.locals(micros=Py_ssize_t, whole=Py_ssize_t, fraction=Py_ssize_t)
cpdef str seconds_text(double seconds)

@cython.locals(millis=Py_ssize_t, second=Py_ssize_t)
cpdef str stamp(double now)


cdef class CallLog(BridgeCallLog):
    cdef public object _schedule
    cdef public object _stream
    cdef public bint _json
    cdef public list _pending
    cdef public dict _texts

    @cython.locals(context=Context, modern=bint, streamed=bint, texts=dict, pending=list, who=str, what=str,
                   ending=str)
    cpdef ended(self, call, Py_ssize_t outcome, double seconds)
    @cython.locals(pending=list, start=str)
    cpdef flush(self)
    cpdef str _text(self, value)
