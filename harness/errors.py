"""Errors a user can cause. The command line prints them as one line, never a traceback."""


class UserError(Exception):
    """A mistake in what the user asked for (bad path, bad config, unknown name).

    The message must say what to do, e.g. ``unknown benchmark 'mat500'; run `rlvr benchmarks` ``.
    """
