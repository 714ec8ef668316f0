"""The one reader of every input file: bounded in size, refusing special files before opening them.

Every policy, cluster, workload and trace file goes through `open_input` (whole files through
`read_bytes`, tables line by line through `text_lines`):

- a FIFO, socket or device (`/dev/zero`, a named pipe, a symlink to either) is refused before any
  open that could block, and a folder is named as such;
- a file larger than the cap (`input_cap()`: `limits.MAX_INPUT_BYTES` for tables,
  `limits.MAX_YAML_BYTES` for YAML, or the environment variable `FAIRSHARE_MAX_INPUT_BYTES`) is
  refused from its size, and one that grows while read (or a gzip file whose content expands past
  the cap) is refused the moment the cap is passed;
- a gzip-compressed file (any file starting with gzip's magic bytes) is decompressed as it is read;
- a line of a table longer than `limits.MAX_LINE_BYTES` is refused without reading further, and a
  byte that is not UTF-8 is reported at its line and column;
- a path the OS refuses (too long, a NUL, a name that cannot be encoded) is one error line.
"""

from __future__ import annotations

import errno
import gzip
import io
import os
import stat
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from ..errors import InputError
from . import limits

ENV_MAX_BYTES = "FAIRSHARE_MAX_INPUT_BYTES"
GZIP_MAGIC = b"\x1f\x8b"
_CHUNK = 1 << 20

_KINDS = (
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def input_cap(default: int = limits.MAX_INPUT_BYTES) -> int:
    """The most bytes one input file may hold (after decompressing): FAIRSHARE_MAX_INPUT_BYTES when
    set to a whole number >= 1, else `default` (limits.MAX_INPUT_BYTES for tables,
    limits.MAX_YAML_BYTES for YAML)."""
    raw = os.environ.get(ENV_MAX_BYTES, "").strip().replace("_", "")
    if not raw:
        return default
    try:
        cap = int(raw)
    except ValueError:
        cap = 0
    if cap < 1:
        raise InputError(
            ENV_MAX_BYTES,
            repr(raw),
            "expected a whole number of bytes >= 1 (the most one input file may hold)",
        )
    return cap


def _too_big(where: str, cap: int, what: str) -> InputError:
    return InputError(
        where,
        "",
        f"{what} more than the limit of {cap:,} bytes for one input file (set {ENV_MAX_BYTES} to raise it)",
    )


def path_problem(path: Path) -> str | None:
    """Why the OS refuses this path name (too long, a NUL, not encodable), or None."""
    try:
        os.fsencode(path)
    except UnicodeEncodeError as exc:
        return f"the path name cannot be used: {exc.reason} ({str(path)[exc.start : exc.end]!r})"
    if "\0" in str(path):
        return "the path name cannot be used: it contains a NUL character"
    return None


def _stat(path: Path, where: str) -> os.stat_result:
    problem = path_problem(path)
    if problem:
        raise InputError(where, "", problem)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise InputError(where, "", "file not found") from None
    except OSError as exc:
        raise InputError(where, "", _os_message(exc)) from None
    _refuse_special(st, where)
    return st


def _os_message(exc: OSError) -> str:
    if exc.errno == errno.ENAMETOOLONG:
        return "cannot read: the path name is too long for the system"
    if exc.errno == errno.ELOOP:
        return "cannot read: too many levels of symbolic links"
    if exc.errno == errno.ENOTDIR:
        return "file not found (a part of the path is not a folder)"
    return f"cannot read: {exc.strerror or exc}"


def _refuse_special(st: os.stat_result, where: str) -> None:
    if stat.S_ISDIR(st.st_mode):
        raise InputError(where, "", "is a folder, not a file")
    if stat.S_ISREG(st.st_mode):
        return
    kind = next((name for test, name in _KINDS if test(st.st_mode)), "not a regular file")
    raise InputError(
        where, "", f"is {kind}, not a regular file: refused (reading it could block or never end)"
    )


def check_input(path: Path) -> None:
    """Refuse at once an input that cannot be read as a file: missing, a folder, a FIFO, socket or
    device, or a path name the OS refuses (before any other work is done)."""
    _stat(path, str(path))


class _Capped(io.RawIOBase):
    """A binary stream that raises InputError once more than `cap` bytes were read from it."""

    def __init__(self, inner: BinaryIO | gzip.GzipFile, cap: int, where: str, what: str) -> None:
        self.inner, self.cap, self.where, self.what, self.count = inner, cap, where, what, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        data = self.inner.read(min(len(buffer), self.cap - self.count + 1))
        n = len(data)
        self.count += n
        if self.count > self.cap:
            raise _too_big(self.where, self.cap, self.what)
        buffer[:n] = data
        return n

    def close(self) -> None:
        self.inner.close()
        super().close()


def open_input(path: Path, *, cap: int | None = None) -> io.BufferedReader:
    """A regular file opened for reading, bounded to `cap` bytes (default `input_cap()`) and
    decompressed when it is gzip. Errors (InputError) name the file."""
    where = str(path)
    cap = input_cap() if cap is None else cap
    st = _stat(path, where)
    if st.st_size > cap:
        raise _too_big(where, cap, f"the file is {st.st_size:,} bytes,")
    try:
        # O_NONBLOCK: if the path was swapped for a FIFO since the stat, the open does not block
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise InputError(where, "", _os_message(exc)) from None
    raw = os.fdopen(fd, "rb", buffering=0)
    try:
        _refuse_special(os.fstat(fd), where)
        os.set_blocking(fd, True)
        head = raw.read(2)
        raw.seek(0)
    except BaseException:
        raw.close()
        raise
    inner: BinaryIO | gzip.GzipFile = raw
    what = "the file grew past"
    if head == GZIP_MAGIC:
        inner = gzip.GzipFile(fileobj=io.BufferedReader(raw, _CHUNK), mode="rb")
        what = "gzip-compressed, and what it holds expands to"
    return io.BufferedReader(_Capped(inner, cap, where, what), _CHUNK)


def _gzip_errors(where: str, exc: Exception) -> InputError:
    return InputError(where, "", f"a damaged gzip file: {exc or 'it ends too early'}")


def read_bytes(path: Path, cap: int | None = None) -> tuple[bytes, bool]:
    """The whole content of an input file (decompressed), bounded by `cap` (default `input_cap()`),
    and whether it was gzip-compressed."""
    where = str(path)
    with open_input(path, cap=cap) as f:
        try:
            return f.read(), isinstance(f.raw, _Capped) and isinstance(f.raw.inner, gzip.GzipFile)
        except (gzip.BadGzipFile, EOFError, zlib.error) as exc:
            raise _gzip_errors(where, exc) from None
        except OSError as exc:
            raise InputError(where, "", _os_message(exc)) from None


def decode(data: bytes, where: str, gzipped: bool = False) -> str:
    """UTF-8 text (a leading byte-order mark dropped); a bad byte is named at its line and column
    (of the decompressed text when `gzipped`)."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        start = exc.start
        line_start = data.rfind(b"\n", 0, start) + 1
        line = data.count(b"\n", 0, start) + 1
        column = len(data[line_start:start].decode("utf-8-sig", "replace")) + 1
        what = "gzip-compressed, but what it holds is not" if gzipped else "not"
        raise InputError(
            where, f"line {line}, column {column}", f"{what} UTF-8 text (the byte 0x{data[start]:02x})"
        ) from None


def text_lines(path: Path) -> Iterator[str]:
    """The lines of a text input one by one, each ending in its '\\n' (the last may not): line N of
    the file is the N-th item. Lines end at '\\n' only; a line longer than MAX_LINE_BYTES, a byte
    that is not UTF-8 or more than the cap are errors at once, in bounded memory."""
    where = str(path)
    most = limits.MAX_LINE_BYTES
    with open_input(path) as f:
        n = 0
        while True:
            try:
                raw = f.readline(most + 1)
            except (gzip.BadGzipFile, EOFError, zlib.error) as exc:
                raise _gzip_errors(where, exc) from None
            except OSError as exc:
                raise InputError(where, "", _os_message(exc)) from None
            if not raw:
                return
            n += 1
            yield _line(raw, n, where, most)


def _line(raw: bytes, n: int, where: str, most: int) -> str:
    """Line `n` of a table (its bytes, with its '\\n'), decoded; InputError if it is too long or
    not UTF-8."""
    if len(raw) > most:
        raise InputError(
            where, f"line {n}", f"the line is longer than {most:,} bytes (the limit for one line)"
        )
    try:
        return raw.decode("utf-8-sig" if n == 1 else "utf-8")
    except UnicodeDecodeError as exc:
        column = len(raw[: exc.start].decode("utf-8-sig", "replace")) + 1
        raise InputError(
            where, f"line {n}, column {column}", f"not UTF-8 text (the byte 0x{raw[exc.start]:02x})"
        ) from None


def text_chunks(path: Path) -> Iterator[str]:
    """The text of a table input in pieces of whole lines (about 1 MiB each; the last piece may end
    without '\\n'): what `text_lines` gives, joined, with the same errors after the same lines (the
    file is read in the same 1 MiB steps, so a cap passed or a damaged gzip stream is found when
    the same lines have been given). A piece holding a line too long or a byte that is not UTF-8
    is given line by line up to it, and that line is the error."""
    where = str(path)
    most = limits.MAX_LINE_BYTES
    with open_input(path) as f:
        n = 0  # lines given so far
        rest = b""  # the start of a line not ended yet
        while True:
            try:
                data = f.read(_CHUNK)
            except (gzip.BadGzipFile, EOFError, zlib.error) as exc:
                raise _gzip_errors(where, exc) from None
            except OSError as exc:
                raise InputError(where, "", _os_message(exc)) from None
            buf = rest + data if rest else data
            cut = buf.rfind(b"\n") + 1 if data else len(buf)  # at the end, the last line has no '\n'
            whole, rest = buf[:cut], buf[cut:]
            if whole:
                first = whole.find(b"\n") + 1 or len(whole)
                plain = first <= most and (len(data) <= most or max(map(len, whole.split(b"\n"))) < most)
                try:
                    text = whole.decode("utf-8-sig" if n == 0 else "utf-8") if plain else None
                except UnicodeDecodeError:
                    text = None
                if text is None:  # the line at fault is an error, after the lines before it
                    for raw in _split_lf(whole):
                        n += 1
                        yield _line(raw, n, where, most)
                else:
                    n += whole.count(b"\n")
                    yield text
            if len(rest) > most:
                raise InputError(
                    where, f"line {n + 1}", f"the line is longer than {most:,} bytes (the limit for one line)"
                )
            if not data:
                return


def _split_lf(data: bytes) -> list[bytes]:
    """The lines of `data` ending at '\\n' only, each with its '\\n'."""
    parts = data.split(b"\n")
    lines = [p + b"\n" for p in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines
