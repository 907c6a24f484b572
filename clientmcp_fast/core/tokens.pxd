# Typed declarations of tokens.py for its compiled build (Cython pure-Python mode): see setup.py.
# Every attribute of __slots__ is declared here, public so Python code sees what it saw before
# (a Grant's readonly: it is never changed once made).

cimport cython


cdef class ToolScope:
    cdef readonly frozenset names
    cdef readonly tuple prefixes
    cdef readonly frozenset key

    cpdef bint allows(self, str name)


cdef class Grant:
    cdef readonly str client_id
    cdef readonly str role
    cdef readonly double exp
    cdef readonly double nbf
    cdef readonly object gen
    cdef readonly ToolScope scope
    cdef readonly bytes resource
    # What the agent used of its limits: changed on every request (public).
    cdef public double allowance
    cdef public double allowance_at
    cdef public Py_ssize_t in_flight


cdef class TokenVerifier:
    cdef public tuple _secrets
    cdef public dict _cache
    cdef public Py_ssize_t _cache_size
    cdef public double wall_offset
    cdef public dict generations
    cdef public str resource_prefix

    cpdef str verify(self, token, str role, double now, bint remember=*)
    @cython.locals(grant=Grant, skew=double, tables=dict, table=dict)
    cpdef Grant grant(self, token, str role, double now, bint remember=*)
    cpdef Grant _check_signature_and_claims(self, token)
