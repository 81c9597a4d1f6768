"""Checkpoints of the post-mortem readers' models, so that reading the same (grown) log again is cheap.

``report``, ``export`` and ``replay`` read a whole source each run, and a daemon's log under systemd
grows for weeks. After a read, the reader's model and the state of its reading (:class:`session.SessionReading`
pickles: byte offsets, line counts, time keys, the events held back for a merge) are stored here; a later
read of the same source loads them and reads only the bytes appended since.

A checkpoint is used only when everything it stands on is unchanged: the tool's version and the code
that parses and models (:func:`code_fingerprint`), what the reader was asked for (``identity``: the
consumer, its options, the source as spelt, its unreadable files), and each file read — its device and
inode, a size at least the bytes read, and digests of its first 64 KiB and of the 64 KiB before the
offset read (a rotated, truncated or rewritten log does not match). Anything else reads cold and
replaces the checkpoint.

The files are pickles, so they are private: ``$XDG_CACHE_HOME/cuzk-tui/models`` (0700), each file 0600,
written to a temporary name and renamed; a file not owned by the user, or open to others, is never
unpickled. A checkpoint that cannot be read or written is ignored (the read is cold, never an error).
Beyond :data:`MAX_ENTRIES` files or :data:`MAX_BYTES` in all, the least recently used go.
``CUZK_TUI_CACHE=off`` (or ``--no-cache``) turns all of it off.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import pickle
import stat
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Final, Generic, TypeVar

from platformdirs import user_cache_dir

from . import collector

ENV: Final = "CUZK_TUI_CACHE"
MAX_ENTRIES: Final = 32
MAX_BYTES: Final = 512 << 20
_DIGESTED: Final = 64 << 10  # bytes of a file digested at its start and before the offset read
_MAGIC: Final = b"cuzk-tui model checkpoint 1\n"
_SUFFIX: Final = ".ckpt"
_ABANDONED_S: Final = 3600.0  # a temporary file this old is no store in progress

State = TypeVar("State")


def enabled(wanted: bool = True) -> bool:
    """Whether checkpoints are used: ``wanted`` (False: ``--no-cache``) and not ``CUZK_TUI_CACHE=off``."""
    return wanted and os.environ.get(ENV, "").strip().lower() not in {"off", "0", "no", "false"}


def cache_dir() -> Path:
    return Path(user_cache_dir("cuzk-tui")) / "models"


@functools.cache
def code_fingerprint() -> str:
    """A digest of the tool's version and of every module of the core package: a model pickled by other
    parsing or modelling code (another release, a local edit) is not one this code may continue."""
    from . import __version__  # importlib.metadata's version() costs a tenth of a second: not for this

    digest = hashlib.blake2b(__version__.encode(), digest_size=16)
    for module in sorted(Path(__file__).parent.glob("*.py")):
        digest.update(module.name.encode() + b"\0" + module.read_bytes())
    return digest.hexdigest()


def _private(st: os.stat_result) -> bool:
    """Owned by this user and open to nobody else (a pickle from anyone else could run their code)."""
    return (
        st.st_uid == os.geteuid() and not st.st_mode & 0o077 and (stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode))
    )


def _footing(path: Path, offset: int) -> list[object] | None:
    """What a checkpoint of ``path`` read up to ``offset`` stands on (None: the file cannot be read)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return [str(path), None, None, offset, "", ""] if offset == 0 else None
    try:
        st = os.fstat(fd)
        if st.st_size < offset:  # truncated (copytruncate rotation) or rewritten shorter
            return None
        head = os.pread(fd, min(offset, _DIGESTED), 0)
        before = os.pread(fd, min(offset, _DIGESTED), max(0, offset - _DIGESTED))
    finally:
        os.close(fd)
    digest = [hashlib.blake2b(part, digest_size=16).hexdigest() for part in (head, before)]
    return [str(path), st.st_dev, st.st_ino, offset, *digest]


class Checkpoints(Generic[State]):
    """The checkpoint of one reader of one source (``key``: the consumer, its options and the source's
    real path) that stands on ``identity`` (see the module docstring)."""

    def __init__(self, key: Sequence[object], identity: Sequence[object], directory: Path | None = None) -> None:
        self.directory = directory if directory is not None else cache_dir()
        name = hashlib.blake2b(json.dumps(list(key)).encode(), digest_size=16).hexdigest()
        self.path = self.directory / (name + _SUFFIX)
        try:
            self._identity: list[object] | None = [code_fingerprint(), *identity]
        except OSError:  # the package's own files do not read: no fingerprint, no checkpoint
            self._identity = None
        self._loaded: list[tuple[str, int]] = []  # the files and offsets the loaded checkpoint stood on
        self._loaded_size = 0  # that checkpoint's bytes

    def load(self) -> State | None:
        """The state stored by :meth:`store`, if its footing still holds; else None (read cold)."""
        try:
            if self._identity is None or not _private(os.stat(self.directory)):
                return None
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            return None
        try:
            with os.fdopen(fd, "rb") as f:
                if not _private(os.fstat(f.fileno())) or f.readline() != _MAGIC:
                    return None
                header = json.loads(f.readline())
                if header["identity"] != json.loads(json.dumps(self._identity)):
                    return None
                if any(_footing(Path(file[0]), file[3]) != file for file in header["files"]):
                    return None
                with collector.paused():
                    state: State = pickle.load(f)
                    # A model lives as long as its reader holds it: the young generations' passes over it
                    # were a tenth of a read-again report.
                    collector.to_oldest_generation()
                self._loaded = [(file[0], file[3]) for file in header["files"]]
                self._loaded_size = os.fstat(f.fileno()).st_size
                os.utime(f.fileno())  # most recently used
                return state
        except Exception:
            return None

    def store(self, files: Sequence[tuple[Path, int]], state: State) -> None:
        """Save ``state`` as standing on ``files`` (each file and the bytes of it that were read), then keep
        the cache within its bounds; any failure leaves things as they were (the next read is cold)."""
        if self._identity is None or not files or not self._worth_storing(files):
            return
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        try:
            footing = [_footing(path, offset) for path, offset in files]
            if any(file is None for file in footing):
                return
            header = json.dumps({"identity": self._identity, "files": footing}).encode()
            with collector.paused():
                body = pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL)
            self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            os.chmod(self.directory, 0o700)  # ours (else this fails): private whatever the umask made it
            if not _private(os.stat(self.directory)):
                return
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(_MAGIC + header + b"\n")
                f.write(body)
            os.replace(tmp, self.path)
            self._evict()
        except Exception:
            with contextlib.suppress(OSError):
                tmp.unlink()

    def _worth_storing(self, files: Sequence[tuple[Path, int]]) -> bool:
        """Whether the bytes read beyond the loaded checkpoint cost more to read again, next time, than
        writing the checkpoint anew costs now: pickling a model costs about what parsing as many bytes
        of log does, so a log grown by less than its checkpoint's size keeps the checkpoint it has (a
        report run every hour on a week of log pickles once in a while, not every run)."""
        if not self._loaded or [str(path) for path, _ in files] != [path for path, _ in self._loaded]:
            return True
        appended = sum(offset - loaded for (_, offset), (_, loaded) in zip(files, self._loaded, strict=True))
        return appended >= self._loaded_size

    def _evict(self) -> None:
        """Remove the least recently used checkpoints beyond MAX_ENTRIES or MAX_BYTES in all, and what a
        process killed while storing left behind (a temporary file older than an hour)."""
        entries: list[tuple[float, int, Path]] = []
        abandoned = time.time() - _ABANDONED_S
        for entry in os.scandir(self.directory):
            if not entry.is_file(follow_symlinks=False):
                continue
            with contextlib.suppress(OSError):
                st = entry.stat(follow_symlinks=False)
                if entry.name.endswith(_SUFFIX):
                    entries.append((st.st_mtime, st.st_size, Path(entry.path)))
                elif entry.name.endswith(".tmp") and st.st_mtime < abandoned:
                    os.unlink(entry.path)
        kept = total = 0
        for _, size, path in sorted(entries, reverse=True):
            kept, total = kept + 1, total + size
            if kept > MAX_ENTRIES or total > MAX_BYTES:
                with contextlib.suppress(OSError):
                    path.unlink()
