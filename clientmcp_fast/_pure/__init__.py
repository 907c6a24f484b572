"""Pure-Python twins of the compiled hot paths in `_speedups/`; `clientmcp_fast.speedups` picks one."""
