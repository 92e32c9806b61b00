"""Linear-time scanning helpers for LaTeX strings: balanced groups and top-level splits.

Brace matching is done by counting, never with backtracking regular expressions, so a
megabyte of nested braces costs one pass.
"""

from __future__ import annotations

OPENERS = "([{"
CLOSERS = ")]}"


def find_group(s: str, i: int) -> tuple[int, int] | None:
    """If a ``{...}`` group starts at ``s[i]`` (after spaces), return its span, else None.

    The span is ``(start, end)`` with ``s[start] == '{'`` and ``end`` one past the matching
    ``}``; escaped braces ``\\{`` and ``\\}`` do not count. None when unbalanced.
    """
    n = len(s)
    while i < n and s[i] == " ":
        i += 1
    if i >= n or s[i] != "{":
        return None
    depth = 0
    j = i
    while j < n:
        c = s[j]
        if c == "\\":
            j += 2
            continue
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return i, j + 1
        j += 1
    return None


def strip_outer_braces(s: str) -> str:
    """``{{x}}`` -> ``x`` when the outer braces enclose the whole string."""
    for _ in range(100):
        if len(s) >= 2 and s[0] == "{":
            span = find_group(s, 0)
            if span and span[1] == len(s):
                s = s[1:-1].strip()
                continue
        break
    return s


def bracket_depths(s: str) -> list[int]:
    """Depth of each character (after the opener, before the closer), any bracket kind.

    ``\\{`` and ``\\}`` count as brackets; ``\\left`` and ``\\right`` were removed upstream.
    """
    depths = [0] * len(s)
    depth = 0
    i = 0
    n = len(s)
    while i < n:
        c = s[i]
        if c == "\\" and i + 1 < n and s[i + 1] in "{}":
            if s[i + 1] == "{":
                depths[i] = depths[i + 1] = depth
                depth += 1
            else:
                depth = max(depth - 1, 0)
                depths[i] = depths[i + 1] = depth
            i += 2
            continue
        if c in OPENERS:
            depths[i] = depth
            depth += 1
        elif c in CLOSERS:
            depth = max(depth - 1, 0)
            depths[i] = depth
        else:
            depths[i] = depth
        i += 1
    return depths


def split_top_level(s: str, separators: tuple[str, ...]) -> list[str]:
    """Split on any separator that occurs at bracket depth 0 (longest separator first)."""
    depths = bracket_depths(s)
    seps = sorted(separators, key=len, reverse=True)
    parts: list[str] = []
    start = 0
    i = 0
    n = len(s)
    while i < n:
        if depths[i] == 0:
            for sep in seps:
                if s.startswith(sep, i) and not (sep[0].isalpha() and i > 0 and s[i - 1].isalnum()):
                    end = i + len(sep)
                    if sep[-1].isalpha() and end < n and s[end].isalnum():
                        continue
                    parts.append(s[start:i])
                    start = end
                    i = end - 1
                    break
        i += 1
    parts.append(s[start:])
    return [p.strip() for p in parts]


def enclosing_pair(s: str) -> tuple[str, str] | None:
    """If one bracket pair encloses the whole string, return its (open, close) tokens.

    Mixed pairs such as ``[2, 5)`` count (they are intervals); ``\\{...\\}`` returns
    ``("\\{", "\\}")``.
    """
    if len(s) < 2:
        return None
    if s.startswith("\\{") and s.endswith("\\}"):
        opener, closer, inner_start = "\\{", "\\}", 2
    elif s[0] in "([" and s[-1] in ")]":
        opener, closer, inner_start = s[0], s[-1], 1
    else:
        return None
    depths = bracket_depths(s)
    end = len(s) - len(closer)
    for k in range(inner_start, end):
        if depths[k] == 0:
            return None
    return opener, closer
