# Typed declarations of jsonrpc.py for its compiled build (Cython pure-Python mode): see setup.py.
# The helpers every call runs, as C functions the typed modules call directly.

cpdef bytes valid_id(raw)
cpdef decode_body(bytes body)
