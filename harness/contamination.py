"""Does a training set contain the benchmarks it will be evaluated on?

Text is normalised (Unicode NFKC, lower case, words = runs of letters and digits plus the
operator characters ``+ - * / = < > ^ %``; other punctuation, ``$`` and backslashes dropped).
A training row contains a benchmark problem when, in normalised words:

* ``exact`` — the statements are equal;
* ``ngram`` — they share 13-grams (GPT-3's decontamination, Brown et al. 2020 App. C, and
  lm-evaluation-harness's use 13-grams): at least ``COVERAGE`` (half) of the problem's distinct
  13-grams. A 13-gram that occurs in more than ``MAX_SHARED`` benchmark problems is boilerplate
  (a shared instruction) and never counts;
* ``contained`` — a problem shorter than 13 words (at least 3) appears whole inside the row.

One shared phrase ("is not divisible by the square of any prime ...", a few overlapping 13-grams)
is how two different problems overlap; a copied problem shares nearly all of its 13-grams. Each
match also records whether the normalised answers are equal (``answer_match``). The index holds
hashes of the benchmark n-grams only, so a training set streams through it
(``benchmarks/bench_contamination.py`` measures the speed).
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import defaultdict
from dataclasses import asdict, dataclass
from typing import Any, Iterable, Sequence

from rlvr.harness.benchmarks.problems import Problem

NGRAM = 13
#: A 13-gram shared by more benchmark problems than this is template text, not a copied problem.
MAX_SHARED = 5
#: Share of a problem's distinct 13-grams a row must contain for an ``ngram`` match.
COVERAGE = 0.5
#: Words a short problem needs before ``contained`` looks for it inside training rows.
MIN_CONTAINED = 3
_WORD = re.compile(r"[0-9a-z]+|[+\-*/=<>^%]")


def normalise(text: str | None) -> list[str]:
    """The words of ``text`` as the tests compare them."""
    if not text:
        return []
    return _WORD.findall(unicodedata.normalize("NFKC", str(text)).lower())


def _ngrams(words: list[str]) -> Iterable[int]:
    return (hash(tuple(words[i : i + NGRAM])) for i in range(len(words) - NGRAM + 1))


def _answer_key(problem: Problem) -> str | None:
    answer = problem.gold.get("answer") if isinstance(problem.gold, dict) else None
    return " ".join(normalise(answer)) or None


@dataclass(frozen=True)
class Match:
    train_index: int
    benchmark: str
    problem_id: str
    kind: str  # "exact" or "ngram"
    evidence: str  # the shared 13-gram, or the start of the shared statement
    answer_match: bool


class BenchmarkIndex:
    """The benchmark problems, indexed by normalised statement, by 13-gram hash and (short
    problems) by their whole word sequence."""

    def __init__(self, problems: Sequence[Problem]):
        self.problems = list(problems)
        self.exact: dict[str, list[int]] = defaultdict(list)
        grams: dict[int, list[int]] = defaultdict(list)
        self.needed: list[int] = []
        self.short: dict[str, dict[int, dict[tuple[str, ...], list[int]]]] = defaultdict(lambda: defaultdict(dict))
        for index, problem in enumerate(self.problems):
            words = normalise(problem.question)
            self.exact[" ".join(words)].append(index)
            own = set(_ngrams(words))
            for gram in own:
                grams[gram].append(index)
            self.needed.append(max(1, math.ceil(COVERAGE * len(own))))
            if MIN_CONTAINED <= len(words) < NGRAM:
                self.short[words[0]][len(words)].setdefault(tuple(words), []).append(index)
        self.grams = {gram: owners for gram, owners in grams.items() if len(owners) <= MAX_SHARED}
        self.answers = [_answer_key(p) for p in self.problems]

    def matches(self, train_index: int, question: str | None, answer: Any = None) -> list[Match]:
        words = normalise(question)
        if not words:
            return []
        found: dict[int, tuple[str, str]] = {}
        for index in self.exact.get(" ".join(words), []):
            found[index] = ("exact", " ".join(words[:NGRAM]))
        shared: dict[int, set[int]] = defaultdict(set)
        first_gram: dict[int, int] = {}
        for i in range(len(words) - NGRAM + 1):
            gram = hash(tuple(words[i : i + NGRAM]))
            for index in self.grams.get(gram, ()):
                shared[index].add(gram)
                first_gram.setdefault(index, i)
        for index, seen in shared.items():
            if index not in found and len(seen) >= self.needed[index]:
                start = first_gram[index]
                found[index] = ("ngram", " ".join(words[start : start + NGRAM]))
        for i, word in enumerate(words):
            for length, sequences in self.short.get(word, {}).items():
                for index in sequences.get(tuple(words[i : i + length]), ()):
                    found.setdefault(index, ("contained", " ".join(words[i : i + length])))
        answer_key = " ".join(normalise(answer)) or None
        return [
            Match(
                train_index,
                self.problems[i].benchmark,
                self.problems[i].id,
                kind,
                evidence,
                answer_key is not None and answer_key == self.answers[i],
            )
            for i, (kind, evidence) in sorted(found.items())
        ]


def contamination_report(
    train: Sequence[dict[str, Any]], problems: Sequence[Problem], benchmarks: Sequence[str], examples: int = 20
) -> tuple[dict[str, Any], list[int]]:
    """``(report, flagged training row indices)`` for ``train`` rows (``question``, ``answer``)
    against ``problems`` of ``benchmarks``."""
    index = BenchmarkIndex(problems)
    per: dict[str, dict[str, Any]] = {
        name: {
            "problems": 0,
            "contaminated_problems": 0,
            "contaminated_train_rows": 0,
            "exact": 0,
            "with_answer": 0,
            "examples": [],
        }
        for name in benchmarks
    }
    for problem in problems:
        per[problem.benchmark]["problems"] += 1
    hit_problems: dict[str, set[str]] = defaultdict(set)
    hit_rows: dict[str, set[int]] = defaultdict(set)
    flagged: set[int] = set()
    for row_index, row in enumerate(train):
        for match in index.matches(row_index, row.get("question"), row.get("answer")):
            entry = per[match.benchmark]
            flagged.add(row_index)
            hit_rows[match.benchmark].add(row_index)
            if match.problem_id not in hit_problems[match.benchmark]:
                hit_problems[match.benchmark].add(match.problem_id)
                entry["exact"] += match.kind == "exact"
                entry["with_answer"] += match.answer_match
                if len(entry["examples"]) < examples:
                    entry["examples"].append(asdict(match))
    for name, entry in per.items():
        entry["contaminated_problems"] = len(hit_problems[name])
        entry["contaminated_train_rows"] = len(hit_rows[name])
        entry["contaminated_problem_ids"] = sorted(hit_problems[name])
    report = {
        "method": {
            "ngram": NGRAM,
            "max_shared": MAX_SHARED,
            "normalisation": "NFKC, lower case, non-alphanumeric runs -> one space",
            "tests": ["exact statement", f"shared {NGRAM}-gram"],
        },
        "train_rows": len(train),
        "flagged_train_rows": len(flagged),
        "benchmarks": per,
    }
    return report, sorted(flagged)
