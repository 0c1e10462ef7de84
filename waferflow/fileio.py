"""Reading inputs and writing outputs: every file waferflow reads or writes goes here.

**Reading.** ``read_text`` / ``decode_text`` turn bytes into text: UTF-8 only (a
leading byte-order mark is dropped), a bad byte reported with its line and column.
``loads_json`` parses JSON with bounded numbers (integers of at most
``MAX_INT_DIGITS`` digits, finite floats), nesting at most ``MAX_DEPTH`` deep, unique
keys and no ``NaN`` / ``Infinity``. The ``want_*`` helpers check a document's
structure and types field by field. Every problem is one ``FormatError`` naming the
file and the line and column or the field path (``$.plan.actors[3].core``); values
quoted in messages are cut short (``short``), so a huge input gives a short message.

**Writing.** ``write_text`` / ``write_bytes`` / ``write_parts`` (a text in pieces) /
``atomic_path`` write a temporary
file in the destination's folder, flush and fsync it, then rename it over the
destination: whoever looks (a reader, or the user after a crash or SIGKILL) finds the
old file or the new one, never a partial one. ``Staged`` holds several outputs back
and renames them together at the end, with Ctrl-C deferred, so that an interrupted
run writes none of them. ``append_line`` adds one whole line to a journal (one
``write`` on a file opened for appending, fsynced before it returns) and
``read_lines`` reads a journal back, cutting off a torn last line left by a crash, so
a line is either wholly there or not at all. Every writer creates the missing folders
above its output (``out/run1/plan.json`` makes ``out/run1``); ``check_output``
refuses, before any work, a path that cannot be written (a file where a folder must be, a folder where
the file must be, a format its name does not choose), and ``os_error_text`` words an
``OSError`` for the user.
"""

from __future__ import annotations

import contextlib
import difflib
import errno
import json
import math
import os
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, BinaryIO, NoReturn

from waferflow.errors import FormatError, ParseError, WaferflowError

__all__ = [
    "INT64_MAX",
    "MAX_DEPTH",
    "MAX_INT_DIGITS",
    "ErrorFactory",
    "Staged",
    "append_line",
    "atomic_dir",
    "atomic_path",
    "check_input",
    "check_output",
    "decode_text",
    "file_path",
    "kind_name",
    "loads_json",
    "os_error_text",
    "read_limited",
    "read_lines",
    "read_stream",
    "read_text",
    "short",
    "want",
    "want_int",
    "want_object",
    "write_bytes",
    "write_parts",
    "write_text",
]

MAX_INT_DIGITS = 400  # far above any count or size, far below Python's 4,300-digit limit
MAX_DEPTH = 100  # nesting of JSON arrays / objects (and of IR attribute lists)
INT64_MAX = 2**63 - 1  # shapes, costs, bytes: what torch and the simulator count in
# a stream (stdin, a pipe, a device) longer than this is refused as it is read: a
# device like /dev/zero, given as a file, would otherwise fill the memory
MAX_INPUT_BYTES = 2**31


def short(value: Any, limit: int = 60) -> str:
    """``repr(value)`` cut to about ``limit`` characters (huge inputs, short messages)."""
    if isinstance(value, str) and len(value) > 4 * limit:
        value = value[: 4 * limit]  # repr of a 1 GB string is not built just to be cut
    elif isinstance(value, list | tuple | dict) and len(value) > limit:
        return f"{kind_name(value)} of {len(value)} items"
    elif isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 200:
        return f"an integer of about {int(value.bit_length() * 0.30103)} digits"
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


# --- bytes to text --------------------------------------------------------------------------


def decode_text(data: bytes, source: str) -> str:
    """``data`` as UTF-8 text; ``FormatError`` at the first byte that is not UTF-8."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        col = err.start - (data.rfind(b"\n", 0, err.start) + 1) + 1
        raise FormatError(
            "",
            f"not UTF-8 text: byte 0x{data[err.start]:02x} (offset {err.start}); "
            "save the file as UTF-8",
            f"{source}:{line}:{col}",
        ) from None
    return text.removeprefix("\ufeff")


def read_limited(path: str | Path, what: str = "file") -> bytes:
    """The bytes of ``path``: a regular file whole (its size is known and finite),
    anything else (a pipe, a device) refused (``WaferflowError``) past
    ``MAX_INPUT_BYTES``; ``OSError``s pass through to the caller, which words them."""
    with open(path, "rb") as f:
        if stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            return f.read()
        return read_stream(f, str(path), what)  # a pipe or a device


def read_stream(f: BinaryIO, source: str, what: str = "input") -> bytes:
    """The bytes of the stream ``f`` (stdin, a pipe, a device), a piece at a time
    (``read(n)`` would allocate ``n`` bytes up front), refused past ``MAX_INPUT_BYTES``."""
    buf = bytearray()
    while len(buf) <= MAX_INPUT_BYTES and (piece := f.read(1 << 20)):
        buf += piece
    if len(buf) > MAX_INPUT_BYTES:
        _too_big(source, what)
    return bytes(buf)


def _too_big(source: str, what: str) -> NoReturn:
    raise WaferflowError(
        f"{source}: the {what} streams more than {MAX_INPUT_BYTES:,} bytes (a device or "
        "an endless pipe?): write it to a file and give that"
    )


def check_input(path: str | Path, what: str) -> None:
    """Refuse an empty input path, which ``Path`` would read as the current folder."""
    if str(path) == "":
        raise WaferflowError(f"the {what}'s path is empty: give the path of the {what}")


def read_text(path: str | Path, what: str = "file", hint: str = "") -> str:
    """The text of ``path`` (UTF-8). A missing file, a folder, an empty path or an
    unreadable file is a ``WaferflowError`` naming ``what`` it should have been;
    ``hint`` says how to make one (``"write one with `waferflow trace`"``)."""
    check_input(path, what)
    try:
        data = read_limited(path, what)
    except FileNotFoundError:
        extra = f" ({hint})" if hint else ""
        raise WaferflowError(f"{path}: no such {what}{extra}") from None
    except IsADirectoryError:
        raise WaferflowError(f"{path}: is a folder, not a {what}") from None
    except PermissionError:
        raise WaferflowError(f"{path}: cannot read the {what}: permission denied") from None
    except OSError as err:
        raise WaferflowError(f"{path}: cannot read the {what}: {err.strerror or err}") from None
    return decode_text(data, str(path))


# --- JSON ------------------------------------------------------------------------------------


def _parse_int(text: str) -> int:
    digits = len(text.lstrip("-"))
    if digits > MAX_INT_DIGITS:
        raise _NumberError(f"an integer of {digits} digits (at most {MAX_INT_DIGITS})")
    return int(text)


def _parse_float(text: str) -> float:
    if len(text) > MAX_INT_DIGITS:
        raise _NumberError(f"a number written with {len(text)} characters")
    value = float(text)
    if not math.isfinite(value):
        raise _NumberError(f"{text} overflows a float (at most about 1.8e308)")
    return value


class _NumberError(ValueError):
    pass


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _NumberError(f"a JSON object has the key {short(key)} twice")
        out[key] = value
    return out


def _reject_constant(name: str) -> Any:
    raise _NumberError(f"{name} is not JSON")


def loads_json(text: str, source: str, *, constant_hint: str = "") -> Any:
    """Parse JSON text with bounded numbers and nesting and unique keys.

    Malformed JSON is a ``ParseError`` with the line and column (``plan.json:3:16``),
    a number out of range or nesting too deep a ``FormatError``; ``constant_hint`` extends the message for ``NaN`` and
    ``Infinity`` (a format that spells non-finite floats another way says how)."""
    try:
        doc = json.loads(
            text,
            object_pairs_hook=_unique_keys,
            parse_constant=_reject_constant,
            parse_int=_parse_int,
            parse_float=_parse_float,
        )
    except json.JSONDecodeError as err:
        raise ParseError(f"malformed JSON: {err.msg}", err.lineno, err.colno, source) from None
    except _NumberError as err:
        extra = constant_hint if "is not JSON" in str(err) else ""
        raise FormatError("$", f"{err}{extra}", source) from None
    except RecursionError:
        raise FormatError("$", "arrays or objects nested too deeply", source) from None
    depth = _depth(doc)
    if depth > MAX_DEPTH:
        raise FormatError(
            "$", f"arrays or objects nested {depth} deep (at most {MAX_DEPTH})", source
        )
    return doc


def _depth(doc: Any) -> int:
    """How deeply arrays and objects nest (iteratively: no recursion on deep input)."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(doc, 1)]
    while stack:
        node, d = stack.pop()
        if isinstance(node, dict):
            node = node.values()
        elif not isinstance(node, list):
            continue
        deepest = max(deepest, d)
        if d <= MAX_DEPTH:
            stack.extend((child, d + 1) for child in node if isinstance(child, list | dict))
    return deepest


# --- structure -------------------------------------------------------------------------------


def kind_name(value: Any) -> str:
    """What a JSON value is, in words: ``an integer``, ``an array``, ``null``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list | tuple):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


ErrorFactory = Callable[[str, str], WaferflowError]


def want_object(
    value: Any,
    path: str,
    keys: tuple[str, ...] | None = None,
    required: int | tuple[str, ...] = 0,
    *,
    error: ErrorFactory | None = None,
) -> dict[str, Any]:
    """``value`` as an object. With ``keys``, every key must be one of them (else a
    did-you-mean); ``required`` is a count (the first keys) or the required keys."""
    err = error or FormatError
    if not isinstance(value, dict):
        raise err(path, f"expected an object, found {kind_name(value)}")
    if keys is not None:
        for key in value:
            if key not in keys:
                close = difflib.get_close_matches(str(key)[:100], keys, n=1)
                hint = f"; did you mean {close[0]!r}?" if close else f" (known: {', '.join(keys)})"
                raise err(f"{path}.{str(key)[:60]}", f"unknown field {short(key)}{hint}")
    needed = keys[:required] if isinstance(required, int) and keys else required
    for key in needed or ():
        if key not in value:
            raise err(path, f"missing field {key!r}")
    return value


def want(
    value: Any,
    path: str,
    check: type | tuple[type, ...] | Callable[[Any], bool],
    what: str,
    *,
    error: ErrorFactory | None = None,
) -> Any:
    """``value`` if it passes ``check`` (a type, types or a predicate; ``bool`` is not
    an ``int`` here), else an error ``expected <what>, found <kind>``."""
    if isinstance(check, type | tuple):
        ok = isinstance(value, check) and not (
            isinstance(value, bool)
            and bool not in (check if isinstance(check, tuple) else (check,))
        )
    else:
        ok = check(value)
    if not ok:
        raise (error or FormatError)(
            path, f"expected {what}, found {kind_name(value)} {short(value)}"
        )
    return value


def want_int(
    value: Any,
    path: str,
    lo: int = 0,
    hi: int = INT64_MAX,
    *,
    error: ErrorFactory | None = None,
) -> int:
    """An integer (not a boolean) in ``lo..hi``."""
    err = error or FormatError
    if isinstance(value, bool) or not isinstance(value, int):
        raise err(path, f"expected an integer, found {kind_name(value)} {short(value)}")
    if not lo <= value <= hi:
        raise err(path, f"{short(value)} is out of range: expected {lo}..{hi}")
    return value


# --- writing ---------------------------------------------------------------------------------


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_FILE_MODE = 0o666 & ~_umask()


def _fsync_dir(folder: Path) -> None:
    with contextlib.suppress(OSError):  # not every file system can sync a folder
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _temp_in(folder: Path, name: str, suffix: str) -> Path:
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{name}.", suffix=f".tmp{suffix}")
    os.close(fd)
    os.chmod(tmp, _FILE_MODE)
    return Path(tmp)


def file_path(path: str | Path) -> Path:
    """``path`` as a ``Path``; a ``WaferflowError`` when it is no path (``None``, a
    number), names a folder (an output file is asked for), or a device or pipe."""
    if not isinstance(path, str | os.PathLike):
        raise WaferflowError(f"{short(path)} is not a file name: give a str or pathlib.Path")
    out = Path(path)
    if out.name in ("", "..") or out.is_dir():
        raise WaferflowError(f"{short(str(path))} is a directory, not a file: give a file name")
    if (why := _not_regular(out)) is not None:
        raise WaferflowError(f"{short(str(path))} {why}")
    return out


def _not_regular(out: Path) -> str | None:
    """Why an existing ``out`` that is neither a folder nor a regular file (a device
    such as /dev/null, a pipe, a socket) cannot be an output: the atomic rename would
    replace it with a file (as root, /dev/null itself)."""
    if not out.exists() or out.is_dir() or out.is_file():
        return None
    return (
        "is a device or pipe, not a regular file: outputs are written to a temporary file "
        "renamed into place, which would replace it; give a file name"
    )


@contextlib.contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside ``path`` (same suffix, so writers that pick a
    format by the name still do); when the block ends normally the file is fsynced
    and renamed over ``path``; on any exception (Ctrl-C included) it is removed and
    ``path`` is left as it was."""
    out = file_path(path)  # else the rename fails late with an OSError naming the temporary
    folder = out.parent
    folder.mkdir(parents=True, exist_ok=True)
    tmp = _temp_in(folder, out.name, out.suffix)
    try:
        yield tmp
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.replace(tmp, out)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(folder)


def write_bytes(path: str | Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically (see ``atomic_path``)."""
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)
    return Path(path)


def write_text(path: str | Path, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically (see ``atomic_path``)."""
    return write_bytes(path, text.encode("utf-8"))


def write_parts(path: str | Path, parts: Iterable[str]) -> Path:
    """Write the strings of ``parts`` in turn (UTF-8) to ``path`` atomically (see
    ``atomic_path``): a big text made piece by piece is never held whole."""
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8", newline="") as f:
        for part in parts:
            f.write(part)
    return Path(path)


def append_line(path: str | Path, line: str) -> None:
    """Append ``line`` (one line, without its newline) to ``path`` as a single
    ``write`` on a file opened for appending, fsynced before returning: after a crash
    the file holds the whole line or none of it, or at worst a torn last line, which
    ``read_lines`` cuts off."""
    if "\n" in line:
        raise ValueError("append_line: the line holds a newline")
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(out, os.O_WRONLY | os.O_APPEND | os.O_CREAT, _FILE_MODE)
    try:
        os.write(fd, (line + "\n").encode("utf-8"))
        os.fsync(fd)
    finally:
        os.close(fd)


def read_lines(path: str | Path) -> tuple[list[bytes], bool]:
    """The whole lines of a file written by ``append_line`` (as bytes, without their
    newlines; ``[]`` when there is no file), and whether a torn last line was found:
    it is cut off the file, so that the next line appended starts on a line of its own."""
    file = Path(path)
    try:
        data = file.read_bytes()
    except FileNotFoundError:
        return [], False
    except OSError as err:
        raise WaferflowError(f"{path}: cannot read: {err.strerror or err}") from None
    whole = data.rfind(b"\n") + 1
    torn = whole < len(data)
    if torn:
        with open(file, "r+b") as f:
            f.truncate(whole)
            os.fsync(f.fileno())
    return data[:whole].splitlines(), torn


@contextlib.contextmanager
def atomic_dir(path: str | Path) -> Iterator[Path]:
    """Yield a fresh temporary folder beside ``path``; when the block ends normally it
    replaces ``path`` (an existing folder there is moved aside and removed only after
    the new one is in place). On an exception the temporary folder is removed."""
    out = Path(path)
    tmp = _temp_dir_for(out)
    try:
        yield tmp
        _replace_dir(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    _fsync_dir(out.parent)


def _temp_dir_for(out: Path) -> Path:
    out.parent.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.", suffix=".tmp"))


def _replace_dir(tmp: Path, out: Path) -> None:
    """Put the folder ``tmp`` at ``out``; an existing one is moved aside first and
    removed only once the new one is in place."""
    old = None
    if out.exists():
        old = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.", suffix=".old"))
        os.replace(out, old / out.name)
    os.replace(tmp, out)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


class Staged:
    """Outputs held back until the run has succeeded.

    ``path(final)`` gives a temporary path beside ``final`` to write to (by any
    writer, atomic or not), ``folder(final)`` a temporary folder; ``commit()`` renames
    them all into place with Ctrl-C deferred until the last rename; leaving the
    ``with`` block without a commit (an error, Ctrl-C) removes the temporaries, so
    nothing is written."""

    def __init__(self) -> None:
        self._pending: list[tuple[Path, Path]] = []
        self._folders: list[tuple[Path, Path]] = []

    def __enter__(self) -> Staged:
        return self

    def __exit__(self, *exc: object) -> None:
        self.discard()

    def path(self, final: str | Path) -> Path:
        out = Path(final)
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = _temp_in(out.parent, out.name, out.suffix)
        self._pending.append((tmp, out))
        return tmp

    def folder(self, final: str | Path) -> Path:
        out = Path(final)
        tmp = _temp_dir_for(out)
        self._folders.append((tmp, out))
        return tmp

    def commit(self) -> list[Path]:
        from waferflow.interrupt import deferred

        done: list[Path] = []
        with deferred():
            for tmp, out in self._pending:
                with open(tmp, "rb+") as f:
                    os.fsync(f.fileno())
                os.replace(tmp, out)
                done.append(out)
            for tmp, out in self._folders:
                _replace_dir(tmp, out)
                done.append(out)
            self._pending.clear()
            self._folders.clear()
        for folder in {p.parent for p in done}:
            _fsync_dir(folder)
        return done

    def discard(self) -> None:
        for tmp, _ in self._pending:
            tmp.unlink(missing_ok=True)
        for tmp, _ in self._folders:
            shutil.rmtree(tmp, ignore_errors=True)
        self._pending.clear()
        self._folders.clear()


# -- output paths checked up front, and OS errors in words ---------------------------------

_ERRNO_WORDS = {
    errno.ENOENT: "does not exist",
    errno.ENOTDIR: "is under a file, not a directory",
    errno.EISDIR: "is a directory, not a file",
    errno.EACCES: "cannot be accessed: permission denied",
    errno.EPERM: "cannot be accessed: operation not permitted",
    errno.EEXIST: "exists and is not a directory",
    errno.ENOSPC: "cannot be written: no space left on the device",
    errno.EROFS: "cannot be written: the file system is read-only",
    errno.ENAMETOOLONG: "has a name that is too long",
}


def os_error_text(err: OSError) -> str:
    """``err`` in words, naming the file: ``out/a exists and is not a directory``."""
    name = err.filename if err.filename is not None else ""
    words = _ERRNO_WORDS.get(err.errno or -1)
    if words is None:
        words = f"cannot be used: {(err.strerror or str(err)).lower()}"
    return f"{name} {words}".strip() if name else (err.strerror or str(err))


def _probe_folder(folder: Path, option: str, path: str) -> None:
    """Create and remove a temporary file in ``folder``, as the writers will: the
    access bits do not tell (root passes them on /proc or a read-only mount)."""
    try:
        tmp = _temp_in(folder, "probe", "")
    except OSError as err:
        words = (err.strerror or str(err)).lower()
        raise WaferflowError(
            f"{option} {short(path)}: files cannot be created in {folder} ({words}): "
            "choose another place"
        ) from None
    tmp.unlink(missing_ok=True)


def check_output(
    path: str | Path, option: str, *, suffixes: tuple[str, ...] = (), folder: bool = False
) -> None:
    """Refuse, before any work, an output ``path`` (given to ``option``) that cannot be
    written: a name whose suffix is not one of ``suffixes`` (the format is chosen by
    it), an existing folder where a file goes (or a file where ``folder`` goes), or a
    file where one of the folders above it must be. Missing folders are fine: the
    writers create them."""
    out = Path(path)
    if str(path) in ("", "."):
        raise WaferflowError(f"{option}: give a {'folder' if folder else 'file'} name")
    if suffixes and out.suffix.lower() not in suffixes:
        got = f"{out.suffix!r}" if out.suffix else "no extension"
        raise WaferflowError(
            f"{option} {short(str(path))}: the name must end in {' or '.join(suffixes)} "
            f"(the format is chosen by it), got {got}"
        )
    if (why := _not_regular(out)) is not None:
        raise WaferflowError(f"{option} {short(str(path))}: {why}")
    if out.exists() and out.is_dir() != folder:
        kind = "a directory" if out.is_dir() else "a file"
        want_kind = "directory" if folder else "file"
        raise WaferflowError(
            f"{option} {short(str(path))}: {kind} is there, where the {want_kind} goes"
        )
    for parent in out.parents:
        if parent.exists():
            if not parent.is_dir():
                raise WaferflowError(
                    f"{option} {short(str(path))}: {parent} exists and is not a directory"
                )
            if not os.access(parent, os.W_OK | os.X_OK):
                raise WaferflowError(f"{option} {short(str(path))}: {parent} is not writable")
            _probe_folder(parent, option, str(path))
            break
