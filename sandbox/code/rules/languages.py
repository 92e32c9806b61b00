"""Languages as data: how to recognise, compile and run a program.

Adding a language is adding an entry. In commands, ``{src}`` is the source in the read-only
program directory, ``{out}`` where the compiler writes the binary (the scratch directory; the
supervisor then moves it into the sealed program directory) and ``{bin}`` that binary.
``warm`` marks the language that runs inside a fork of the already-started interpreter of the
sandbox (Python), which is what makes short tests cheap;
every other language is compiled once per submission and executed per test.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Language:
    name: str
    source: str
    fences: tuple[str, ...]
    compile: tuple[str, ...] | None = None
    run: tuple[str, ...] = ()
    warm: bool = False
    markers: tuple[str, ...] = ()
    functional: bool = False


LANGUAGES: dict[str, Language] = {
    "python": Language(
        name="python",
        source="solution.py",
        fences=("python", "py", "python3", "py3"),
        warm=True,
        functional=True,
    ),
    "cpp": Language(
        name="cpp",
        source="main.cpp",
        fences=("cpp", "c++", "cc", "cxx"),
        compile=("/usr/bin/g++", "-std=gnu++17", "-O2", "-pipe", "-o", "{out}", "{src}"),
        run=("{bin}",),
        markers=("#include", "int main"),
    ),
    "c": Language(
        name="c",
        source="main.c",
        fences=("c",),
        compile=("/usr/bin/gcc", "-std=gnu11", "-O2", "-pipe", "-o", "{out}", "{src}", "-lm"),
        run=("{bin}",),
        markers=("#include", "int main"),
    ),
}


def get_language(name: str) -> Language:
    key = {"c++": "cpp", "py": "python", "python3": "python"}.get(name.lower(), name.lower())
    if key not in LANGUAGES:
        raise ValueError(f"unknown language {name!r}; supported: {', '.join(sorted(LANGUAGES))}")
    return LANGUAGES[key]
