"""The one way out for files (as :mod:`servecap.files` is the one way in): every file the
project writes -- HTML reports, CSV tables, exports, calibrations, run exports, Parquet records --
goes through here.

- :func:`check_target` is called before the work: the target must be a regular file or a new
  name in an existing, writable folder; a directory, a FIFO (a writer would block until someone
  reads it), a device (``/dev/full``, ``/dev/stdout``), a socket or an empty name is refused by
  name. The check creates and removes a temporary file beside the target, so a read-only file
  system, a folder the user may not write (``/proc``, ``/sys``) or a full disk that cannot hold a
  new directory entry fails here, before minutes of simulation, not after them.
- :func:`write_text` / :func:`write_bytes` / :func:`replacing` write a temporary file beside the
  target (same folder, so the same file system), flush and ``fsync`` it, then ``os.replace`` it into
  place: a reader never sees half a file, and a failed write leaves the old file as it was.
- every ``OSError`` (``ENOSPC``, ``EROFS``, ``EACCES``, ``EISDIR``, ``EFBIG``) becomes one
  :class:`~servecap.errors.ServecapError` naming the flag (``field``) and the path.

Interfaces save the run to the store before they write a file, so a failed file never loses the
run.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

from servecap.errors import ServecapError

_KIND_BY_MODE = (
    (stat.S_ISDIR, "is a directory, not a file"),
    (stat.S_ISFIFO, "is a FIFO (named pipe), not a regular file: a write would wait for a reader"),
    (stat.S_ISCHR, "is a character device, not a regular file (leave the flag out to print to stdout)"),
    (stat.S_ISBLK, "is a block device, not a regular file"),
    (stat.S_ISSOCK, "is a socket, not a regular file"),
)


def _reason(err: OSError) -> str:
    return err.strerror or type(err).__name__


def _file_mode() -> int:
    """The mode a new file gets from ``open()`` under the process's umask (``mkstemp`` uses 0600)."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def check_target(path: Path | str, field: str) -> Path:
    """``path`` as a :class:`Path` once it is known to be writable as a file (see the module doc),
    else one error naming ``field`` and the path."""
    text = os.fspath(path)
    if text.strip() == "":
        raise ServecapError(field, text, "is an empty name: give a file name")
    target = Path(text)
    try:
        info = target.stat()
    except FileNotFoundError:
        info = None
    except OSError as err:
        raise ServecapError(field, text, f"cannot be written ({_reason(err)})") from None
    if info is not None:
        if not stat.S_ISREG(info.st_mode):
            kind = next((why for test, why in _KIND_BY_MODE if test(info.st_mode)), "is not a regular file")
            raise ServecapError(field, text, kind)
    elif text.endswith(os.sep):
        raise ServecapError(field, text, "names a folder (ends with a slash), not a file")
    folder = target.parent
    if not folder.is_dir():
        raise ServecapError(field, text, f"its folder {str(folder)!r} does not exist")
    discard(temp_beside(target, field))
    return target


def temp_beside(target: Path, field: str) -> Path:
    """A new empty temporary file in ``target``'s folder (same file system: the rename is atomic)."""
    try:
        fd, tmp_name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    except OSError as err:
        raise ServecapError(field, str(target), f"cannot be written in its folder ({_reason(err)})") from None
    os.close(fd)
    return Path(tmp_name)


def commit(tmp: Path, target: Path, field: str) -> None:
    """Move the finished ``tmp`` into place as ``target`` (the new file gets the umask's mode)."""
    try:
        os.chmod(tmp, _file_mode())
        os.replace(tmp, target)
    except OSError as err:
        discard(tmp)
        raise ServecapError(field, str(target), f"cannot be written ({_reason(err)})") from None


def discard(tmp: Path) -> None:
    """Remove a temporary file that will not be used (a failed or abandoned write)."""
    with contextlib.suppress(OSError):
        tmp.unlink()


def os_error(err: OSError, target: Path | str, field: str) -> ServecapError:
    """``err`` from writing ``target`` as the one-line error naming ``field``."""
    return ServecapError(field, str(target), f"cannot be written ({_reason(err)})")


@contextlib.contextmanager
def replacing(path: Path | str, field: str) -> Iterator[Path]:
    """A temporary path beside ``path`` for a writer that opens files itself: what it writes
    there is moved into place when the block ends without an error, and removed otherwise.
    ``OSError`` raised in the block becomes one :class:`ServecapError` naming ``field``."""
    target = check_target(path, field)
    tmp = temp_beside(target, field)
    try:
        yield tmp
    except OSError as err:
        discard(tmp)
        raise os_error(err, path, field) from None
    except BaseException:
        discard(tmp)
        raise
    commit(tmp, target, field)


def write_bytes(path: Path | str, data: bytes, field: str) -> Path:
    """Write ``data`` to ``path`` through a temporary file beside it (see the module doc)."""
    with replacing(path, field) as tmp, open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    return Path(path)


def write_text(path: Path | str, text: str, field: str) -> Path:
    """Write ``text`` as UTF-8 to ``path`` (see :func:`write_bytes`)."""
    return write_bytes(path, text.encode("utf-8"), field)
