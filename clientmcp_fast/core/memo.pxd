# Typed declarations of memo.py for its compiled build (Cython pure-Python mode): see setup.py.
# The memos' one helper, as a C function the typed modules call directly.

cpdef remember(dict memo, key, value, Py_ssize_t max_entries)
