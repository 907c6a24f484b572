"""Errors raised by the hot-path modules, shared by the compiled and the pure twins."""


class FrameError(Exception):
    """A client broke RFC 6455 framing; the connection ends with `code` and `reason`."""

    def __init__(self, code: int, reason: str) -> None:
        super().__init__(code, reason)
        self.code = code
        self.reason = reason
