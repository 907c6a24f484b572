"""The thin I/O layer: uvloop + httptools protocols that feed the core and write what it says."""
