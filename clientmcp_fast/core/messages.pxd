# Typed declarations of messages.py for its compiled build (Cython pure-Python mode): see setup.py.
# The helpers every call runs, as C functions the typed modules call directly.

cpdef bytes call_message(bytes call_id, bytes name, arguments)
