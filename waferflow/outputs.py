"""Writing an output file so that a reader never sees half of it.

The bytes go to a temporary file beside the target, which then replaces the target in
one ``os.replace``: an interrupted run leaves the old file (or none), never a truncated
one. Pictures, traces and HTML reports are written through ``write_output``.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path


def write_output(path: str | Path, data: bytes | str) -> Path:
    """Write ``data`` (text is UTF-8 encoded) to ``path`` atomically; return the path.
    Missing parent directories are created."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    raw = data.encode("utf-8") if isinstance(data, str) else data
    # opened with mode 0o666 so that the umask applies, as for a plain open()
    tmp = out.parent / f".{out.name}.{secrets.token_hex(4)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
        os.replace(tmp, out)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return out


__all__ = ["write_output"]
