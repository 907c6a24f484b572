# Typed declarations of agent_streams.py for its compiled build (Cython pure-Python mode): see setup.py.
# The streams stay Python classes (compiled); the SSE event every streamed answer is, a C function.

cpdef bytes sse_event(payload)
