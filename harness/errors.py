"""Errors a user can cause. The command line prints them as one line, never a traceback."""


class UserError(Exception):
    """A mistake in what the user asked for (bad path, bad config, unknown name).

    The message must say what to do, e.g. ``unknown benchmark 'mat500'; run `rlvr benchmarks` ``.
    """


def note_kept(exc: BaseException, kept: str) -> None:
    """Record on an interrupt what the run kept on disk ("12 samples kept in DIR ...", "nothing
    finished; nothing kept"); ``rlvr`` prints it as the one interrupt line, so the message is
    written where the facts are known, never guessed at the top."""
    exc.rlvr_kept = kept  # type: ignore[attr-defined]


def describe_os_error(exc: OSError) -> str:
    """An ``OSError`` as one line that names the path and what to check."""
    import errno

    path = exc.filename if exc.filename is not None else ""
    other = f" -> {exc.filename2}" if getattr(exc, "filename2", None) else ""
    reason = exc.strerror or str(exc) or type(exc).__name__
    hint = {
        errno.ENOTDIR: "a part of the path is a file, not a directory; choose another path",
        errno.EEXIST: "it already exists; choose another path",
        errno.EISDIR: "it is a directory; name a file",
        errno.EACCES: "check its permissions or choose another path",
        errno.EPERM: "check its permissions or choose another path",
        errno.ENOSPC: "the disk is full; free space or write elsewhere",
        errno.EROFS: "the file system is read-only; write elsewhere",
        errno.ENOENT: "check the path",
    }.get(exc.errno or 0, "check the path")
    where = f" {path!s}{other}" if path else ""
    return f"cannot use{where}: {reason} ({hint})"
