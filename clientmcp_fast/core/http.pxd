# Typed declarations of http.py for its compiled build (Cython pure-Python mode): see setup.py.
# The helper every answer runs, as a C function the typed modules call directly.

cimport cython


@cython.locals(prefix=bytes, known=dict)
cpdef bytes response_head(int status, headers, content_length, bint close, bint chunked=*)
