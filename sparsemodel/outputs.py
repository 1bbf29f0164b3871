"""Output files: never the model or its data, never an existing file without permission, checked
again at the moment of writing.

* :func:`protected_paths` -- a problem's inputs: the model file and every data file it read;
* :func:`check_output` -- refuses an empty path, a directory, a missing folder, an input of the
  problem (the same file under any name: ``os.path.samefile`` catches hard and symbolic links)
  and, without ``overwrite``, an existing file;
* :func:`write_output` -- checks again and writes (exclusively, without ``overwrite``: a file that
  appeared meanwhile is not replaced);
* :func:`distinct` -- refuses two outputs to one file;
* :class:`RowSink` -- a CSV opened when a sweep starts, one row written (and flushed) as each run
  finishes, so that an interrupted sweep keeps what it finished.

A failure of the write itself (a full disk, ``/dev/full``, a quota, a read-only file system, a
permission refused) is an :class:`OutputError` naming the file and the system's reason
(:func:`write_error`), never an internal error.
"""

from __future__ import annotations

import csv
import errno
import os
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any

from .errors import OutputError


def protected_paths(problem: Any) -> list[Path]:
    """The problem's input files: its model file (``Problem.source``) and every data file it read
    (``file.npz:member`` names the file)."""
    out: list[Path] = []
    src = getattr(problem, "source", None)
    if src and not str(src).startswith("<") and Path(src).exists():
        out.append(Path(src))
    for d in getattr(problem, "data", {}).values():
        p = getattr(d, "path", None)
        if not p:
            continue
        p = str(p)
        if not Path(p).exists() and ":" in p:
            p = p.rsplit(":", 1)[0]
        out.append(Path(p))
    return out


def _same(a: Path, b: Path) -> bool:
    try:
        if a.exists() and b.exists():
            return os.path.samefile(a, b)
    except OSError:
        pass
    return a.resolve() == b.resolve()


def check_output(
    path: str | Path, protected: Iterable[Path], overwrite: bool = False, flag: str = "overwrite=True"
) -> Path:
    """The output path, or an OutputError saying why it must not or cannot be written."""
    if str(path).strip() == "":
        raise OutputError("the output path is empty", hint="give a file name")
    out = Path(path)
    for p in protected:
        if _same(out, p):
            raise OutputError(
                f"refusing to write to {path}: it is an input of this problem ({p} is an input of this model: "
                "the model file or one of its data files)",
                hint="choose another output file",
            )
    if out.is_dir():
        raise OutputError(f"cannot write {path}: it is a directory")
    if out.exists() and not overwrite:
        raise OutputError(f"refusing to overwrite the existing file {path}", hint=f"choose a new name, or pass {flag}")
    if not out.parent.exists():
        raise OutputError(f"cannot write {path}: the directory {out.parent} does not exist")
    return out


def open_output(
    path: str | Path, protected: Iterable[Path], overwrite: bool, binary: bool = False, flag: str = "overwrite=True"
) -> IO[Any]:
    """Check, then open for writing: exclusively without ``overwrite`` (a file created meanwhile
    is refused, not replaced)."""
    out = check_output(path, protected, overwrite, flag)
    mode = ("w" if overwrite else "x") + ("b" if binary else "")
    try:
        return open(out, mode, **({} if binary else {"newline": "", "encoding": "utf-8"}))  # noqa: SIM115
    except FileExistsError:
        raise OutputError(
            f"refusing to overwrite {path}: it appeared while the run was going on",
            hint=f"choose a new name, or pass {flag}",
        ) from None
    except OSError as exc:
        raise write_error(path, exc) from None


REASONS = {
    errno.ENOSPC: "the disk is full",
    errno.EDQUOT: "the disk quota is exceeded",
    errno.EFBIG: "the file would be too large",
    errno.EROFS: "the file system is read-only",
    errno.EACCES: "permission denied",
    errno.EPERM: "permission denied",
    errno.EIO: "an input/output error",
}


def write_error(path: str | Path, exc: OSError) -> OutputError:
    """The error of a failed write to ``path``: the system's message and what it means."""
    why = exc.strerror or str(exc)
    plain = REASONS.get(exc.errno or 0)
    detail = f"{why} ({plain})" if plain and plain.lower() != why.lower() else why
    return OutputError(
        f"write error: cannot write {path}: {detail}",
        hint="no input was changed; free some space or write elsewhere, then run again"
        if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
        else "choose a file you may write (another folder, or check its permissions)",
    )


def write_output(
    path: str | Path,
    data: str | bytes,
    protected: Iterable[Path],
    overwrite: bool = False,
    flag: str = "overwrite=True",
) -> Path:
    fh = open_output(path, protected, overwrite, isinstance(data, bytes), flag)
    try:
        try:
            fh.write(data)
            fh.flush()
        finally:
            fh.close()
    except OSError as exc:  # a full disk shows at the write or the close
        raise write_error(path, exc) from None
    return Path(path)


def distinct(paths: dict[str, str | None]) -> None:
    """Refuse two outputs to the same file (``{"--csv": "t.out", "--plot": "t.out"}``)."""
    seen: dict[Path, str] = {}
    for flag, p in paths.items():
        if not p:
            continue
        for q, other in seen.items():
            if _same(Path(p), q):
                raise OutputError(f"{other} and {flag} both write {p}", hint="give each output its own file")
        seen[Path(p)] = flag


class RowSink:
    """A CSV written row by row as results arrive (flushed after each)."""

    def __init__(
        self,
        path: str | Path,
        columns: list[str],
        protected: Iterable[Path],
        overwrite: bool = False,
        flag: str = "overwrite=True",
    ):
        self.path = Path(path)
        self.fh = open_output(path, protected, overwrite, flag=flag)
        self.columns = columns
        self.writer = csv.DictWriter(self.fh, fieldnames=columns, lineterminator="\n")
        try:
            self.writer.writeheader()
            self.fh.flush()
        except OSError as exc:
            self.close()
            raise write_error(self.path, exc) from None
        self.rows = 0

    def write(self, row: dict[str, Any]) -> None:
        try:
            self.writer.writerow(
                {
                    c: ("" if row.get(c) is None else (repr(row[c]) if isinstance(row[c], float) else row[c]))
                    for c in self.columns
                }
            )
            self.fh.flush()
        except OSError as exc:
            self.close()
            raise write_error(self.path, exc) from None
        self.rows += 1

    def close(self) -> None:
        if self.fh.closed:
            return
        try:
            self.fh.close()
        except OSError as exc:
            raise write_error(self.path, exc) from None


__all__ = ["RowSink", "check_output", "distinct", "open_output", "protected_paths", "write_error", "write_output"]
