"""Find the final answer in a completion.

Rules, tried in the policy's precedence order:

* ``answer_tag`` — restrict the search to the last ``<answer>...</answer>`` (R1 style); the
  text inside is then searched with the other rules, or taken whole.
* ``boxed`` — the **last** ``\\boxed{...}`` / ``\\fbox{...}`` (balanced braces). A truncated
  last box means the final answer was cut off: no answer. When the gold has k > 1 items,
  consecutive boxes joined only by connectors ("and", commas) are read together. More
  distinct boxed values than the policy allows is hedging.
* ``hash`` — GSM8K's ``#### X`` (the last one anywhere).
* ``final_hash`` — ``#### X`` only as the completion's last line: the GSM8K convention read by
  the default policy too, without letting a stray ``####`` mid-text become an answer.
* ``answer_is`` — "the (final) answer is X", "Answer: X" (rightmost).
* ``bare`` — the whole completion is itself a short answer with no prose.
* ``last_number`` — the last number in the text; only for benchmarks that opt in.

A policy whose ``answer_format`` is ``boxed`` or ``r1`` skips these rules for the Dr. GRPO
originals' stricter ones (``extract_original``).

All scanning is linear in the completion length.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from rlvr.sandbox.math.latex_scan import find_group
from rlvr.sandbox.math.policy import MathPolicy

MAX_COMPLETION_CHARS = 2_000_000
_BOX_RE = re.compile(r"\\(boxed|fbox|framebox)\b")
_CONNECTOR_TOKENS_RE = re.compile(
    r"\\text\{\s*and\s*\}|\\quad|\\qquad|\\\\|\band\b|\b[a-zA-Z](?:_\{?\w+\}?)?\s*=|[\s$.,;:&()\\\[\]]",
    re.IGNORECASE,
)
_ANSWER_IS_RE = re.compile(
    r"\banswer\s*(?:\*\*)?\s*(?:is|:|=|would\s+be|will\s+be)\s*[:=]?\s*",
    re.IGNORECASE,
)
#: "Answer" opening a line and followed directly by math: ``Answer $9$``, ``Answer \\[ 9 \\]``
_ANSWER_MATH_RE = re.compile(
    r"(?:^|\n)[ \t]*(?:\*\*)?(?:final[ \t]+)?answer(?:\*\*)?[ \t]*[:.]?[ \t]*(?=\$|\\\[|\\\()", re.IGNORECASE
)
_MATH_DELIMITERS = (("$$", "$$"), ("\\[", "\\]"), ("\\(", "\\)"), ("$", "$"))
_INLINE = ("$", "\\(")
_MATH_SPAN_RE = re.compile(r"\$[^$]{1,200}\$")
_STATES_RE = re.compile(r"\s(?:is|are|equals|was|were)\s|\s=\s", re.IGNORECASE)
_WORD_RE = re.compile(r"(?<![\\a-zA-Z])[A-Za-z]{2,}(?![a-zA-Z])")
_MATH_WORDS = frozenset("pi sin cos tan cot sec csc log ln exp sqrt arcsin arccos arctan mod inf infty".split())
_QUALIFIER_RE = re.compile(
    r"\b(?:not|no|never|cannot|can't|isn't|impossible|none|neither|nor|either|or|least|most|more|less|fewer"
    r"|greater|between|approximately|about|around|roughly|nearly|almost|over|under|except|if)\b",
    re.IGNORECASE,
)
_BARE_BOX_RE = re.compile(r"[ \t]+([^\s$.,;{}]+)")
_NUMBER_RE = re.compile(r"-?\d{1,3}(?:,\d{3})+(?:\.\d+)?|-?\d+(?:\.\d+)?(?:/\d+)?|-?\.\d+")
_PROSE_RE = re.compile(r"(?<![\\a-zA-Z])[A-Za-z]{2,}\s+[A-Za-z]{2,}(?![a-zA-Z])")


@dataclass(frozen=True)
class Extraction:
    """The extracted answer (None when there is none) and the rule that produced it."""

    answer: str | None
    rule: str
    boxes: tuple[str, ...] = field(default_factory=tuple)
    hedging: bool = False
    detail: str = ""


def find_boxes(text: str) -> list[tuple[int, int, str | None]]:
    """All boxes as ``(start, end, content)``; content None for an unbalanced (truncated) box.

    ``\\boxed 5`` (no braces) boxes the following token, as LaTeX does.
    """
    boxes: list[tuple[int, int, str | None]] = []
    for m in _BOX_RE.finditer(text):
        span = find_group(text, m.end())
        if span is not None:
            boxes.append((m.start(), span[1], text[span[0] + 1 : span[1] - 1]))
            continue
        token = _BARE_BOX_RE.match(text, m.end())
        if token is not None and not text.startswith("{", token.start(1)):
            boxes.append((m.start(), token.end(), token.group(1)))
            continue
        boxes.append((m.start(), len(text), None))
        break
    return boxes


def _region(completion: str, policy: MathPolicy) -> tuple[str, str]:
    """The part of the completion to search: the last answer tag, or after ``</think>``."""
    if "answer_tag" in policy.extract:
        close = completion.rfind("</answer>")
        if close != -1:
            open_ = completion.rfind("<answer>", 0, close)
            if open_ != -1:
                return completion[open_ + len("<answer>") : close], "answer_tag"
    think = completion.rfind("</think>")
    if think != -1 and completion[think + len("</think>") :].strip():
        return completion[think + len("</think>") :], ""
    return completion, ""


def _canon(box: str) -> str:
    return re.sub(r"\s+|\\[,!;: ]|\\left|\\right|\$", "", box).rstrip(".")


def _from_boxes(region: str, policy: MathPolicy, gold_items: int) -> Extraction | None:
    boxes = find_boxes(region)
    if not boxes:
        return None
    if boxes[-1][2] is None:
        return Extraction(None, "boxed", detail="last box is truncated (unbalanced braces)")
    contents = [b[2] for b in boxes if b[2] is not None]
    distinct = {_canon(c) for c in contents}
    allowed = policy.max_distinct_boxes + max(gold_items - 1, 0)
    if len(distinct) > allowed:
        return Extraction(
            contents[-1],
            "boxed",
            tuple(contents),
            hedging=True,
            detail=f"hedging: {len(distinct)} distinct boxed answers",
        )
    chosen = [boxes[-1]]
    if gold_items > 1:
        items = _count_items(boxes[-1][2])
        k = len(boxes) - 2
        while items < gold_items and k >= 0:
            between = region[boxes[k][1] : chosen[0][0]]
            if boxes[k][2] is None or len(between) > 40 or _CONNECTOR_TOKENS_RE.sub("", between):
                break
            chosen.insert(0, boxes[k])
            items += _count_items(boxes[k][2])
            k -= 1
    answer = ", ".join(b[2] for b in chosen)
    rule = "boxed" if len(chosen) == 1 else f"boxed x{len(chosen)}"
    return Extraction(answer, rule, tuple(contents))


def _count_items(content: str) -> int:
    from rlvr.sandbox.math.latex_scan import split_top_level

    return len([p for p in split_top_level(content, (",", ";")) if p])


def _answer_is(region: str) -> str | None:
    last = None
    for pattern in (_ANSWER_IS_RE, _ANSWER_MATH_RE):
        for m in pattern.finditer(region):
            if last is None or m.end() > last.end():
                last = m
    if last is None:
        return None
    tail = region[last.end() :]
    tail = tail.split("\n\n", 1)[0] if not tail.lstrip().startswith(("$$", "\\[")) else tail
    tail = tail.strip().lstrip("*").strip()
    if not tail:
        return None
    for opener, closer in _MATH_DELIMITERS:
        if tail.startswith(opener):
            close = tail.find(closer, len(opener))
            if close != -1 and not (opener in _INLINE and "\n" in tail[:close]):  # inline math is one line
                return tail[len(opener) : close].strip() or None
            break
    line = tail.split("\n", 1)[0]
    m = re.search(r"\.(?=\s|$)", line)
    sentence = line[: m.start()] if m else line
    sentence = re.sub(r"\s*(?:I hope it is correct|I hope).*$", "", sentence, flags=re.IGNORECASE)
    sentence = sentence.strip().strip("*").strip()
    if not sentence or len(sentence) > 300:
        return None
    return value_in_sentence(sentence)


def value_in_sentence(sentence: str) -> str:
    """The value a one-sentence answer states ("The largest $n$ is 34." -> ``34``): the text
    after its last "is"/"are"/"equals" ("6 ways" -> ``6``), else its only number or math span. A
    sentence that is not prose, that qualifies its value ("not", "at least", "or", ...) or that
    states two values ("x is 5 and y is 6") is kept whole."""
    masked = _MATH_SPAN_RE.sub(lambda m: "$" + "\x00" * (len(m.group(0)) - 2) + "$", sentence)
    if not _PROSE_RE.search(_MATH_SPAN_RE.sub(" ", sentence)) or _QUALIFIER_RE.search(masked):
        return sentence
    verbs = list(_STATES_RE.finditer(masked))
    if verbs:
        if len(verbs) > 1 and _candidates(sentence[verbs[0].end() : verbs[-1].start()]):
            return sentence
        value = sentence[verbs[-1].end() :].strip()
        if value and not _PROSE_RE.search(_MATH_SPAN_RE.sub(" ", value)):
            found = _candidates(value)
            words = _WORD_RE.findall(_MATH_SPAN_RE.sub(" ", value))
            if len(found) == 1 and words and not any(w.lower() in _MATH_WORDS for w in words):
                return found[0]  # "6 ways"
            return value
    found = _candidates(sentence)
    return found[0] if len(found) == 1 else sentence


def _candidates(text: str) -> list[str]:
    """The math spans and the numbers outside them."""
    return _MATH_SPAN_RE.findall(text) + _NUMBER_RE.findall(_MATH_SPAN_RE.sub(" ", text))


def _final_hash(region: str) -> str | None:
    """``X`` when the last non-blank line is ``#### X``."""
    tail = region.rstrip()
    line = tail[tail.rfind("\n") + 1 :].strip()
    if not line.startswith("####"):
        return None
    return line[4:].strip() or None


def _is_bare(region: str) -> bool:
    text = region.strip()
    if not text or "\n" in text or len(text) > 200:
        return False
    without_text = re.sub(r"\\(?:text|textbf|mathrm|mbox)\{[^{}]*\}", " ", text)
    return _PROSE_RE.search(without_text) is None


R1_SEPARATOR = "</think> <answer>"


def extract_original(completion: str, answer_format: str) -> Extraction:
    """The answer as Dr. GRPO's reward functions read it, so ``boxed_only`` / ``r1_format`` runs
    are rewarded as the paper's were (understand-r1-zero ``math_grader.py`` at dfca49d, as our
    notes record it: docs/algorithms.md §2.6 and fidelity check 6 in §2.11).

    * ``boxed`` (``boxed_reward_fn``, Qwen-Math and no template): the last ``\\boxed{}`` /
      ``\\fbox{}`` of the whole completion (``</think>`` does not narrow the search), braces
      matched; none, or a truncated last box, is no answer. "The answer is 5", ``#### 5``, a bare
      "5" and ``<answer>5</answer>`` earn nothing. Only the last box is read: earlier boxes are
      neither a hedge (the default's ``max_distinct_boxes``) nor joined into a multi-item answer,
      since oat reads one box — listing candidates in boxes gains nothing when only the last
      counts, while a single box listing candidates is still graded as a list.
    * ``r1`` (``answer_tag_reward_fn``, R1 template): the completion must contain
      ``"</think> <answer>"`` (exactly one space) and ``"</answer>"``, else no answer. The answer
      is the text after the last ``<answer>`` with every ``</answer>`` removed; if it contains
      ``\\boxed``, the last box (none readable: no answer), else the whole text, stripped — where
      oat grades the text as it stands, so prose inside the tags is graded as the answer (and
      fails), not searched for "the answer is".

    The R1 template puts ``<think>`` in the prompt, so a completion reads "... </think> <answer>
    X </answer>" (generation stops at ``</answer>``); that the tags must be separated by exactly
    one space is oat's substring test, not an inference.
    """
    region = completion
    if answer_format == "r1":
        if R1_SEPARATOR not in completion or "</answer>" not in completion:
            return Extraction(None, "none", detail=f"r1 format: needs {R1_SEPARATOR!r} and '</answer>'")
        region = completion.split("<answer>")[-1].replace("</answer>", "")
        if "\\boxed" not in region:
            text = region.strip()
            return Extraction(text or None, "answer_tag", detail="" if text else "r1 format: empty answer tag")
    boxes = find_boxes(region)
    if not boxes:
        return Extraction(None, "none", detail=f"{answer_format} format: no \\boxed{{}}")
    if boxes[-1][2] is None:
        return Extraction(None, "boxed", detail="last box is truncated (unbalanced braces)")
    return Extraction(boxes[-1][2], "boxed", tuple(b[2] for b in boxes if b[2] is not None))


def extract_answer(completion: str, policy: MathPolicy, gold_items: int = 1) -> Extraction:
    """Apply the policy's extraction rules in order; see the module docstring."""
    completion = completion[-MAX_COMPLETION_CHARS:] if len(completion) > MAX_COMPLETION_CHARS else completion
    if policy.answer_format != "free":
        return extract_original(completion, policy.answer_format)
    region, region_rule = _region(completion, policy)
    for rule in policy.extract:
        if rule == "answer_tag":
            continue
        if rule == "boxed":
            found = _from_boxes(region, policy, gold_items)
            if found is not None:
                return found
        elif rule == "hash":
            idx = region.rfind("####")
            if idx != -1:
                value = region[idx + 4 :].strip().split("\n", 1)[0].strip()
                if value:
                    return Extraction(value, "hash")
        elif rule == "final_hash":
            value = _final_hash(region)
            if value is not None:
                return Extraction(value, "final_hash")
        elif rule == "answer_is":
            value = _answer_is(region)
            if value is not None:
                return Extraction(value, "answer_is")
        elif rule == "bare":
            if _is_bare(region):
                return Extraction(region.strip(), "bare" if not region_rule else region_rule)
        elif rule == "last_number":
            numbers = _NUMBER_RE.findall(region[-5000:])
            if numbers:
                return Extraction(numbers[-1], "last_number")
    return Extraction(None, "none", detail="no final answer found")
