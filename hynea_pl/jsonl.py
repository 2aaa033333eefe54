"""Append-only JSON-lines files (records, ratings): what a write killed half-way leaves, and how it is cut off."""

from __future__ import annotations

import os
import warnings
from pathlib import Path


def drop_torn_tail(path: Path, consequence: str = "its case runs again") -> int:
    """Cut a torn last line (a write killed before its newline) off a JSON-lines file; returns the bytes dropped.

    Every entry is written as one line ending in a newline, so a file whose last byte is not a newline ends in an
    entry that was never completely written; the warning names the ``consequence`` (a campaign runs that case
    again, the rating page asks that question again).
    """
    path = Path(path)
    if not path.exists() or path.stat().st_size == 0:
        return 0
    with path.open("rb") as stream:
        stream.seek(-1, os.SEEK_END)
        if stream.read(1) == b"\n":
            return 0
    data = path.read_bytes()
    keep = data.rfind(b"\n") + 1
    with path.open("r+b") as stream:
        stream.truncate(keep)
        stream.flush()
        os.fsync(stream.fileno())
    dropped = len(data) - keep
    warnings.warn(f"{path}: dropped a torn last line ({dropped} bytes, a write that was killed); {consequence}",
                  stacklevel=2)
    return dropped


__all__ = ["drop_torn_tail"]
