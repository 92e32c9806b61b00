"""The documentation the tests hold to its word: the README and every page under docs/."""

from __future__ import annotations

from pathlib import Path

from conftest import ROOT

#: README.md first, then the docs/ pages in name order
DOC_PAGES: list[Path] = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def doc_text() -> str:
    """Every page, joined: for claims that must appear somewhere in the documentation."""
    return "\n\n".join(page.read_text(encoding="utf-8") for page in DOC_PAGES)


def page_name(page: Path) -> str:
    return str(page.relative_to(ROOT))


def fenced_blocks() -> list[tuple[str, str, int, str]]:
    """``(page, language, first line, text)`` of every fenced block (fences at the start of a line)."""
    blocks = []
    for page in DOC_PAGES:
        current, lang, start = None, "", 0
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
            if line.startswith("```"):
                if current is None:
                    current, lang, start = [], line[3:].strip(), number + 1
                else:
                    blocks.append((page_name(page), lang, start, "\n".join(current) + "\n"))
                    current = None
            elif current is not None:
                current.append(line)
    return blocks
