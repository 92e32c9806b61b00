"""Find the program in a completion: the last fenced code block, else the whole completion."""
from __future__ import annotations

import ast
import re

from sandbox.code.languages import Language

_FENCE_RE = re.compile(r"^[ \t]*(`{3,}|~{3,})[ \t]*([\w+#.-]*)[^\n]*\n(.*?)^[ \t]*\1[ \t]*$", re.S | re.M)
_OPEN_FENCE_RE = re.compile(r"^[ \t]*(`{3,})[ \t]*([\w+#.-]*)[^\n]*\n(.*)\Z", re.S | re.M)


def extract_program(completion: str, language: Language) -> str | None:
    """The program to run, or None (``no_code``).

    Rules: the last fenced block tagged with this language (```python, ```py) or untagged;
    else, for an unterminated last fence (a truncated completion), its contents; else the whole
    completion if it is a program on its own (Python: it parses; others: it has the markers).
    """
    blocks = [(m.group(2).lower(), m.group(3)) for m in _FENCE_RE.finditer(completion)]
    tagged = [code for tag, code in blocks if tag in language.fences or tag == ""]
    if tagged:
        return tagged[-1]
    if not blocks:
        opened = _OPEN_FENCE_RE.search(completion)
        if opened and (opened.group(2).lower() in language.fences or opened.group(2) == ""):
            return opened.group(3)
    text = completion.strip("\n").rstrip()
    if not text.strip():
        return None
    if language.name == "python":
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return None
        return text if tree.body and not all(isinstance(node, ast.Expr) and isinstance(getattr(node, "value", None), ast.Constant) for node in tree.body) else None
    if language.markers and all(marker in text for marker in language.markers):
        return text
    return None


def defines(program: str, name: str) -> bool:
    """Does the Python program define ``name`` (function, class, method or assignment)?"""
    try:
        tree = ast.parse(program)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
            return True
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            return True
    return False
