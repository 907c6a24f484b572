"""The sans-I/O core: protocol state, validation and mapping; no sockets, no clock reads."""
