"""A self-signed certificate for loopback, made with the openssl command: for the TLS tests."""

from __future__ import annotations

import subprocess
from pathlib import Path


def self_signed(folder: Path) -> tuple[Path, Path]:
    """A one-day certificate for 127.0.0.1 (its own authority) and its key, written in `folder`."""
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return cert, key
