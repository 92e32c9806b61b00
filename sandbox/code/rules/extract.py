"""Find the program in a completion: the last fenced code block, else the whole completion."""

from __future__ import annotations

import ast
import re

from rlvr.sandbox.code.rules.languages import Language

_FENCE_LINE_RE = re.compile(r"^[ \t]*(`{3,}|~{3,})[ \t]*([\w+#.-]*)[^\n]*$")
#: A decimal integer literal too long for the interpreter's default digit cap (4300).
_LONG_INT_RE = re.compile(r"(?<![\w.])[0-9][0-9_]{4000,}")


def parse_python(source: str) -> ast.Module:
    """``ast.parse`` that does not trip over the interpreter's 4300-digit cap on integer
    literals, without lifting that process-wide setting in the caller's process: where the
    cap is what failed, long decimal literals are replaced by ``0`` in a copy (a literal for
    a literal: the copy parses exactly when the program does). The sandbox runs the program
    itself with the cap lifted."""
    try:
        return ast.parse(source)
    except SyntaxError as exc:
        if "integer string conversion" not in str(exc.msg):
            raise
    return ast.parse(_LONG_INT_RE.sub("0", source))


def check_python_syntax(source: str) -> None:
    """Raise ``SyntaxError`` (or ``ValueError`` / ``RecursionError`` / ``MemoryError``) where
    the interpreter would refuse to compile the program; nothing is run. The source itself is
    compiled, as the sandbox does, never a tree from ``ast.parse``: compiling such a tree walks
    it recursively and refuses programs the interpreter compiles (an ``if``/``elif`` chain of
    1,000 branches is a tree 1,000 deep). Only the digit cap is lifted, as in ``parse_python``."""
    try:
        compile(source, "solution.py", "exec", dont_inherit=True)
    except SyntaxError as exc:
        if "integer string conversion" not in str(exc.msg):
            raise
        compile(_LONG_INT_RE.sub("0", source), "solution.py", "exec", dont_inherit=True)


def compiles(source: str) -> bool:
    try:
        check_python_syntax(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return True


def fenced_blocks(completion: str) -> tuple[list[tuple[str, str]], tuple[str, str] | None]:
    """``([(tag, code), ...], unterminated)`` scanning line by line. A closing fence is a line of
    only the opening fence's characters. An empty untagged fence followed by a tagged one
    (models write "```" then "```python") counts as the tagged block."""
    blocks: list[tuple[str, str]] = []
    fence: str | None = None
    tag = ""
    lines: list[str] = []
    for line in completion.split("\n"):
        match = _FENCE_LINE_RE.match(line)
        if fence is None:
            if match:
                fence, tag, lines = match.group(1), match.group(2).lower(), []
        elif match and line.strip() == fence:
            blocks.append((tag, "\n".join(lines) + "\n"))
            fence = None
        elif match and match.group(2) and not tag and not "".join(lines).strip():
            fence, tag, lines = match.group(1), match.group(2).lower(), []
        else:
            lines.append(line)
    return blocks, ((tag, "\n".join(lines)) if fence is not None else None)


def extract_program(completion: str, language: Language) -> str | None:
    """The program to run, or None (``no_code``).

    Rules: the last fenced block tagged with this language (```python, ```py) or untagged;
    else, for an unterminated last fence (a truncated completion), its contents; else the whole
    completion if it is a program on its own (Python: it parses; others: it has the markers).
    """
    blocks, unterminated = fenced_blocks(completion)
    tagged = [code for tag, code in blocks if tag in language.fences or tag == ""]
    if tagged:
        return tagged[-1]
    if not blocks and unterminated is not None and (unterminated[0] in language.fences or unterminated[0] == ""):
        return unterminated[1]
    text = completion.strip("\n").rstrip()
    if not text.strip():
        return None
    if language.name == "python":
        try:
            tree = parse_python(text)
        except RecursionError:  # deeper than a tree of Python objects: the interpreter decides
            return text if compiles(text) else None
        except (SyntaxError, ValueError, MemoryError):
            return None
        return (
            text
            if tree.body
            and not all(
                isinstance(node, ast.Expr) and isinstance(getattr(node, "value", None), ast.Constant)
                for node in tree.body
            )
            else None
        )
    if language.markers and all(marker in text for marker in language.markers):
        return text
    return None


def defines(program: str, name: str) -> bool:
    """Does the Python program define ``name`` (function, class, method or assignment)?"""
    try:
        tree = parse_python(program)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
            return True
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            return True
    return False


def with_prelude(prelude: str, program: str, language: str) -> str:
    """``prelude + program``: the imports and helpers a benchmark's own harness supplies (e.g.
    LiveCodeBench's ``from typing import *`` block, LeetCode's ``ListNode``). Python
    ``from __future__`` lines must stay first, so the prelude goes after them."""
    head = ""
    if language == "python":
        lines = program.split("\n")
        cut = 0
        for number, line in enumerate(lines):
            stripped = line.strip()
            if stripped.startswith("from __future__ import"):
                cut = number + 1
            elif stripped and not stripped.startswith("#"):
                break
        head, program = "\n".join(lines[:cut]) + ("\n" if cut else ""), "\n".join(lines[cut:])
    return head + prelude.rstrip("\n") + "\n" + program
