"""Reward functions for TRL, verl and OpenRLHF, in process or against ``rlvr serve``.

All of them build the same items and grade them through ``GradingService.grade`` (locally) or
``RewardClient`` (remotely, which calls the same service on the server), so a reward equals
the grade ``rlvr eval`` would report for the same completion. The default service redacts
verdict details (no hidden expected value reaches a reward path) and runs code on every call
(no cached lucky pass); see ``rlvr.sandbox.service``.

TRL::

    from rlvr.sandbox.serving.rewards import trl_reward
    trainer = GRPOTrainer(..., reward_funcs=[trl_reward()])        # dataset has an "answer" column

verl (``reward.custom_reward_function.path=sandbox/serving/rewards.py``,
``reward.custom_reward_function.name=compute_score``, or ``compute_score_batch`` with
``reward.reward_manager.name=batch``). OpenRLHF: ``--reward.remote_url
http://HOST:PORT/get_reward`` (server) or ``--reward.remote_url sandbox/serving/rewards.py`` (this file's
``reward_func``).
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, Callable

from rlvr.sandbox.grader import Grader
from rlvr.sandbox.process_wide import ProcessWide
from rlvr.sandbox.service import CODE_OPTIONS, GradingService, Item, parse_item
from rlvr.sandbox.verdict import Verdict

_CODE_SOURCES = (
    "livecodebench",
    "lcb",
    "codecontests",
    "apps",
    "taco",
    "code",
    "humaneval",
    "mbpp",
    "leetcode",
    "primeintellect",
    "kodcode",
)
_POLICY_BY_SOURCE = (
    ("gsm8k", "gsm8k"),
    ("minerva", "minerva"),
    ("olympiad", "olympiadbench"),
    ("aime", "aime"),
    ("arith", "arith"),
)
_ANSWER_KEYS = ("answer", "solution", "ground_truth", "label", "gold")
_SPECIAL_TOKENS_RE = re.compile(
    r"(?:<\|im_end\|>|<\|endoftext\|>|<\|eot_id\|>|</s>|<\|end\|>|<｜end▁of▁sentence｜>)+\s*$"
)

_service = ProcessWide(lambda: GradingService())


def default_service() -> GradingService:
    """The process-wide grading service used by the adapters (created on first use)."""
    return _service.get()


def completion_text(completion: Any) -> str:
    """TRL passes strings, or chat message lists for conversational datasets."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, Mapping):
        return str(completion.get("content", ""))
    if isinstance(completion, Sequence):
        return "".join(completion_text(m) for m in completion)
    return "" if completion is None else str(completion)


def _is_code_label(label: Any) -> bool:
    if isinstance(label, Mapping):
        return any(k in label for k in ("tests", "inputs", "input_output"))
    if isinstance(label, list):
        return bool(label) and isinstance(label[0], Mapping) and ("input" in label[0] or "args" in label[0])
    if isinstance(label, str) and label.lstrip().startswith(("{", "[")):
        try:
            return _is_code_label(json.loads(label))
        except ValueError:
            return False
    return False


def code_spec(label: Any) -> dict[str, Any]:
    """Tests and call options from a code label: a tests list, ``{"tests": ..., "fn_name"}``,
    ``{"inputs", "outputs", "fn_name"}`` (APPS/PRIME style), or any of those as JSON text."""
    if isinstance(label, str):
        label = json.loads(label)
    if isinstance(label, Mapping) and "input_output" in label:
        inner = label["input_output"]
        label = json.loads(inner) if isinstance(inner, str) else inner
    if isinstance(label, list):
        return {"tests": label}
    spec = {k: label[k] for k in CODE_OPTIONS if k != "partial" and label.get(k)}
    if "tests" in label:
        spec["tests"] = label["tests"]
    else:
        spec["tests"] = {"inputs": label["inputs"], "outputs": label["outputs"], "fn_name": label.get("fn_name")}
    return spec


def make_item(
    completion: Any,
    label: Any,
    kind: str = "auto",
    policy: str | None = None,
    extra: Mapping[str, Any] | None = None,
    index: int = 0,
) -> Item:
    """One grading item from a completion and a dataset label (gold answer or code spec)."""
    text = completion_text(completion)
    extra = dict(extra or {})
    if kind == "auto":
        kind = extra.pop("kind", None) or ("code" if _is_code_label(label) or "tests" in extra else "math")
    if kind == "code":
        spec = code_spec(label) if label is not None else {}
        raw = {
            "kind": "code",
            "completion": text,
            **spec,
            **{k: v for k, v in extra.items() if k in (*CODE_OPTIONS, "tests") and v is not None},
        }
    else:
        if isinstance(label, (list, tuple)) and label:
            label = label[0]
        raw = {"kind": "math", "completion": text, "answer": "" if label is None else str(label)}
        for key in ("answer_type", "tolerance", "multiple"):
            if extra.get(key) is not None:
                raw[key] = extra[key]
        if policy or extra.get("policy"):
            raw["policy"] = extra.get("policy") or policy
    return parse_item(raw, index)


def _reward(verdict_reason: str, reward: float, verifiable: bool, mask_unverifiable: bool) -> float | None:
    if mask_unverifiable and not verifiable:
        return None
    return reward


# ---------------------------------------------------------------------------------------------
# TRL
# ---------------------------------------------------------------------------------------------
def _trl_items(
    completions: Sequence[Any], kwargs: Mapping[str, Any], kind: str, policy: str | None, answer_key: str | None
) -> list[Item]:
    n = len(completions)
    columns = {k: v for k, v in kwargs.items() if isinstance(v, (list, tuple)) and len(v) == n}
    key = answer_key or next((k for k in _ANSWER_KEYS if k in columns), None)
    if key is None and "tests" not in columns:
        raise ValueError(f"no gold column: pass answer_key=... (columns: {sorted(columns)})")
    items = []
    for i, completion in enumerate(completions):
        extra = {k: v[i] for k, v in columns.items() if k != key}
        label = columns[key][i] if key is not None else None
        if label is None and "tests" in extra:
            label = extra.pop("tests")
        items.append(make_item(completion, label, kind, policy, extra, i))
    return items


def trl_reward(
    kind: str = "auto",
    *,
    policy: str | None = None,
    answer_key: str | None = None,
    mask_unverifiable: bool = False,
    client: Any = None,
    service: GradingService | None = None,
    name: str | None = None,
) -> Callable[..., list[float | None]]:
    """A TRL ``reward_funcs`` entry.

    It accepts TRL's keyword arguments (``prompts``, ``completions`` as strings or message
    lists, ``completion_ids``, every dataset column, ``trainer_state``, ...) and returns one
    reward per completion. The gold comes from ``answer_key`` (default: the first of answer,
    solution, ground_truth, label, gold) or, for code, a ``tests`` column plus optional
    ``fn_name`` / ``starter_code`` columns. With ``mask_unverifiable`` a timeout or grader error
    returns None, which TRL excludes instead of teaching it as wrong. No signals are used, so
    it works from TRL's worker threads.
    """

    def reward(
        prompts: Any = None, completions: Sequence[Any] = (), completion_ids: Any = None, **kwargs: Any
    ) -> list[float | None]:
        items = _trl_items(list(completions), kwargs, kind, policy, answer_key)
        verdicts = _grade(items, client, service)
        return [_reward(v.reason, v.reward, v.verifiable, mask_unverifiable) for v in verdicts]

    reward.__name__ = name or f"rlvr_{kind}_reward"
    return reward


def trl_reward_async(kind: str = "auto", **options: Any) -> Callable[..., Any]:
    """The ``async`` variant: TRL awaits async reward functions concurrently."""
    sync = trl_reward(kind, **options)

    async def reward(
        prompts: Any = None, completions: Sequence[Any] = (), completion_ids: Any = None, **kwargs: Any
    ) -> list[float | None]:
        return await asyncio.to_thread(
            sync, prompts=prompts, completions=completions, completion_ids=completion_ids, **kwargs
        )

    reward.__name__ = sync.__name__ + "_async"
    return reward


def _grade(items: list[Item], client: Any, service: Grader[Item, Verdict] | None) -> list[Verdict]:
    if client is not None:
        return client.grade_items(items)
    return (service or default_service()).grade(items)


# ---------------------------------------------------------------------------------------------
# verl
# ---------------------------------------------------------------------------------------------
def _verl_item(
    data_source: str, solution_str: str, ground_truth: Any, extra_info: Mapping[str, Any] | None, index: int = 0
) -> Item:
    source = (data_source or "").lower()
    extra = dict(extra_info or {})
    kind = extra.pop("kind", None)
    if kind is None:
        kind = "code" if _is_code_label(ground_truth) or any(tag in source for tag in _CODE_SOURCES) else "math"
    policy = next((p for tag, p in _POLICY_BY_SOURCE if tag in source), None)
    return make_item(solution_str, ground_truth, kind, policy, extra, index)


def _verl_result(verdict) -> dict[str, Any]:
    # verl logs every extra key as a per-sample metric: keep them numeric.
    return {
        "score": float(verdict.reward),
        "acc": float(verdict.correct),
        "verifiable": float(verdict.verifiable),
        "timeout": float(verdict.reason in ("timeout", "time_limit")),
    }


def compute_score(
    data_source: str, solution_str: str, ground_truth: Any, extra_info: Mapping[str, Any] | None = None, **kwargs: Any
) -> dict[str, Any]:
    """verl's custom reward signature; dispatches on ``data_source`` (gsm8k, minerva,
    olympiadbench, aime and code sources; anything else is MATH-style) and returns
    ``{"score", "acc", "verifiable", "timeout"}``. ``extra_info`` may carry ``kind``,
    ``policy``, ``answer_type``, ``tolerance``, ``fn_name``, ``starter_code``."""
    item = _verl_item(data_source, solution_str, ground_truth, extra_info)
    return _verl_result(_grade([item], kwargs.get("client"), kwargs.get("service"))[0])


def compute_score_batch(
    data_sources: Sequence[str],
    solution_strs: Sequence[str],
    ground_truths: Sequence[Any],
    extra_infos: Sequence[Any] | None = None,
    **kwargs: Any,
) -> list[dict[str, Any]]:
    """The batched form verl's ``batch`` reward manager calls (one list in, one list out)."""
    extras = list(extra_infos) if extra_infos is not None else [None] * len(solution_strs)
    items = [
        _verl_item(d, s, g, e, i)
        for i, (d, s, g, e) in enumerate(zip(data_sources, solution_strs, ground_truths, extras))
    ]
    return [_verl_result(v) for v in _grade(items, kwargs.get("client"), kwargs.get("service"))]


# ---------------------------------------------------------------------------------------------
# OpenRLHF
# ---------------------------------------------------------------------------------------------
def response_from_query(query: str, prompt: str | None) -> str:
    """OpenRLHF sends prompt + response decoded with special tokens: keep the response."""
    text = query
    if prompt and text.startswith(prompt):
        text = text[len(prompt) :]
    return _SPECIAL_TOKENS_RE.sub("", text)


def openrlhf_items(queries: Sequence[str], prompts: Sequence[str] | None, labels: Sequence[Any] | None) -> list[Item]:
    prompts = list(prompts) if prompts is not None else [None] * len(queries)
    labels = list(labels) if labels is not None else [None] * len(queries)
    if not (len(queries) == len(prompts) == len(labels)):
        raise ValueError(
            f"query, prompts and labels must have the same length ({len(queries)}, {len(prompts)}, {len(labels)})"
        )
    return [
        make_item(response_from_query(q, p), label, "auto", None, None, i)
        for i, (q, p, label) in enumerate(zip(queries, prompts, labels))
    ]


def openrlhf_response(verdicts) -> dict[str, Any]:
    rewards = [float(v.reward) for v in verdicts]
    return {
        "rewards": rewards,
        "scores": rewards,
        "extra_logs": {
            "acc": [float(v.correct) for v in verdicts],
            "verifiable": [float(v.verifiable) for v in verdicts],
        },
    }


def reward_func(queries: Sequence[str], prompts: Sequence[str], labels: Sequence[Any], **kwargs: Any) -> dict[str, Any]:
    """OpenRLHF's reward-function file form (``--reward.remote_url path/to/rewards.py``)."""
    verdicts = _grade(openrlhf_items(queries, prompts, labels), kwargs.get("client"), kwargs.get("service"))
    out = openrlhf_response(verdicts)
    try:
        import torch

        out["rewards"] = torch.tensor(out["rewards"])
        out["scores"] = torch.tensor(out["scores"])
        out["extra_logs"] = {k: torch.tensor(v) for k, v in out["extra_logs"].items()}
    except ImportError:
        pass
    return out
