# Typed declarations of tokens.py for its compiled build (Cython pure-Python mode): see setup.py.
# Every attribute of __slots__ is declared here, public so Python code sees what it saw before
# (a Grant's readonly: it is never changed once made).

cimport cython


cdef class Grant:
    cdef readonly str client_id
    cdef readonly str role
    cdef readonly double exp
    cdef readonly double nbf
    cdef readonly object gen


cdef class TokenVerifier:
    cdef public tuple _secrets
    cdef public dict _cache
    cdef public Py_ssize_t _cache_size
    cdef public double wall_offset
    cdef public dict generations

    @cython.locals(grant=Grant, skew=double, tables=dict, table=dict)
    cpdef str verify(self, token, str role, double now, bint remember=*)
    cpdef Grant _check_signature_and_claims(self, token)
