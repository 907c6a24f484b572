"""Errors raised by the hot-path modules, shared by the compiled and the pure twins."""


class FrameError(Exception):
    """A client broke RFC 6455 framing; the connection ends with `code` and `reason`.

    `frames` holds the frames that came complete before the error in the same read: they
    were sent in good order and are still delivered before the connection fails.
    """

    def __init__(self, code: int, reason: str) -> None:
        super().__init__(code, reason)
        self.code = code
        self.reason = reason
        self.frames: list[tuple[int, int, bytes]] = []


class RequestRefused(Exception):
    """Raised from an HTTP parser callback to stop parsing: answer `status`, then close."""

    def __init__(self, status: int, text: str) -> None:
        super().__init__(status, text)
        self.status = status
        self.text = text
