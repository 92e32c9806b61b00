"""Every ``§N.M`` a source file cites resolves to a section of ``docs/algorithms.md``, and no code
cites the notes that used to live outside the repository."""

import re
from pathlib import Path

import pytest
from conftest import ROOT

NOTES = ROOT / "docs" / "algorithms.md"
CODE_DIRS = ("sandbox", "harness", "trainers", "benchmarks")
CITATION = re.compile(r"§\s*(\d+(?:\.\d+)*)")
HEADING = re.compile(r"^#{2,4} (\d+(?:\.\d+)*)\.? ", re.M)


def sections(notes: str) -> set[str]:
    """The section numbers of the notes' headings ("## 5. CoRP" -> "5", "### 5.4 ..." -> "5.4")."""
    return set(HEADING.findall(notes))


def unresolved(text: str, known: set[str]) -> list[str]:
    """The citations in ``text`` that name no section of the notes."""
    return [number for number in CITATION.findall(text) if number not in known]


def _sources() -> list[Path]:
    return sorted(p for d in CODE_DIRS for p in (ROOT / d).rglob("*.py"))


def test_the_notes_have_the_sections_the_code_cites():
    known = sections(NOTES.read_text(encoding="utf-8"))
    assert {"2.5", "2.6", "3", "3.3", "4.1", "4.2", "4.5", "5", "5.2", "5.5", "5.7"} <= known
    missing = {
        f"{path.relative_to(ROOT)}: §{number}"
        for path in _sources()
        for number in unresolved(path.read_text(encoding="utf-8"), known)
    }
    assert not missing, sorted(missing)


def test_no_code_cites_the_external_notes():
    citing = [str(p.relative_to(ROOT)) for p in _sources() if "ALGORITHMS.md" in p.read_text(encoding="utf-8")]
    assert not citing


@pytest.mark.parametrize(
    ("text", "bad"),
    [
        ("the elite set (docs/algorithms.md §5.4 step 1)", []),
        ("see §5.4 and §2.6", []),
        ("a section that does not exist: §9.9", ["9.9"]),
        ("§5.4.7 is deeper than any heading", ["5.4.7"]),
        ("§ 42", ["42"]),
    ],
)
def test_a_bogus_citation_is_caught(text, bad):
    assert unresolved(text, sections(NOTES.read_text(encoding="utf-8"))) == bad
