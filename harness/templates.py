"""Prompt templates: how a problem becomes the text (or chat messages) sent to the model.

The three Dr. GRPO templates are reproduced byte for byte (Liu et al. 2025, "Understanding
R1-Zero-Like Training", Templates 1-3; ``r1`` stops at ``</answer>`` and keeps it). ``fewshot``
takes k worked solutions from the benchmark (never the evaluated problem); ``chat`` uses the
model's own chat template with the benchmark's instruction. A YAML/JSON/text file defines a
template of your own. The template's name and a hash of its text are recorded with every sample.
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence, Union

from rlvr.harness.errors import UserError

Prompt = Union[str, list[dict[str, str]]]

R1_TEXT = (
    "A conversation between User and Assistant. The User asks a question, and the Assistant solves it. "
    "The Assistant first thinks about the reasoning process in the mind and then provides the User with the answer. "
    "The reasoning process is enclosed within <think> </think> and answer is enclosed within <answer> </answer> tags, "
    "respectively, i.e., <think> reasoning process here </think> <answer> answer here </answer>.\nUser: "
    "{question}\nAssistant: <think>"
)
QWEN_MATH_TEXT = (
    "<|im_start|>system\nPlease reason step by step, and put your final answer within \\boxed{}.<|im_end|>\n"
    "<|im_start|>user\n{question}<|im_end|>\n<|im_start|>assistant\n"
)
SHOT_SEPARATOR = "\n\n"
FEWSHOT_STOP = ("\n\nProblem:",)


@dataclass(frozen=True)
class Template:
    """``kind``: ``text`` (a string with ``{question}`` / ``{instruction}``), ``chat`` (messages
    rendered by the model's chat template) or ``fewshot``. ``include_stop``: keep a matched
    stop string in the completion (R1 keeps ``</answer>``)."""

    name: str
    kind: str
    text: str = "{question}"
    messages: tuple[tuple[str, str], ...] = ()
    stop: tuple[str, ...] = ()
    include_stop: bool = True
    shots: int = 0
    source: str = "builtin"
    description: str = ""

    def identity(self) -> dict[str, Any]:
        """What about the template changes scores (goes into the fingerprint)."""
        body = json.dumps([self.kind, self.text, self.messages, self.stop, self.include_stop, self.shots])
        return {
            "name": self.name,
            "hash": hashlib.sha256(body.encode()).hexdigest()[:12],
            "stop": list(self.stop),
            "shots": self.shots,
        }


BUILTIN: dict[str, Template] = {
    "qwen_math": Template(
        "qwen_math",
        "text",
        QWEN_MATH_TEXT,
        description="Qwen2.5-Math system prompt as a raw string (Dr. GRPO Template 2); stops at EOS",
    ),
    "r1": Template(
        "r1",
        "text",
        R1_TEXT,
        stop=("</answer>",),
        description="DeepSeek-R1-Zero template (Dr. GRPO Template 1); stops at </answer>, kept",
    ),
    "no_template": Template("no_template", "text", "{question}", description="the bare question (Dr. GRPO Template 3)"),
    "fewshot": Template(
        "fewshot",
        "fewshot",
        stop=FEWSHOT_STOP,
        include_stop=False,
        shots=4,
        description="k worked solutions from the benchmark, then the question; stops before the next 'Problem:'",
    ),
    "chat": Template(
        "chat",
        "chat",
        messages=(("user", "{question}\n\n{instruction}"),),
        description="the model's own chat template; user turn = question + benchmark instruction",
    ),
}


def load_template(name: str, shots: int | None = None) -> Template:
    """A built-in template by name, or a template file (``.yaml``/``.yml``/``.json``/``.txt``)."""
    if name in BUILTIN:
        template = BUILTIN[name]
        if shots is not None and template.kind == "fewshot":
            if shots < 1:
                raise UserError("--shots must be at least 1")
            template = Template(**{**template.__dict__, "shots": shots})
        return template
    path = Path(name).expanduser()
    if not path.exists():
        raise UserError(
            f"unknown template {name!r}; use one of {sorted(BUILTIN)} or a path to a .yaml/.json/.txt template file"
        )
    return _template_file(path)


def _template_file(path: Path) -> Template:
    raw = path.read_text(encoding="utf-8")
    if path.suffix == ".txt":
        data: Any = {"prompt": raw}
    else:
        try:
            import yaml

            data = yaml.safe_load(raw) if path.suffix in (".yaml", ".yml") else json.loads(raw)
        except (ValueError, yaml.YAMLError) as exc:
            raise UserError(
                f"template file {path} is not valid {path.suffix[1:].upper()}: {str(exc).splitlines()[0]}"
            ) from exc
    if not isinstance(data, dict) or ("prompt" in data) == ("messages" in data):
        raise UserError(
            f"template file {path} must define exactly one of 'prompt' (text with {{question}}) or 'messages' (a chat)"
        )
    stop = data.get("stop") or []
    if isinstance(stop, str):
        stop = [stop]
    common = {
        "name": str(data.get("name") or path.stem),
        "stop": tuple(stop),
        "include_stop": bool(data.get("include_stop", True)),
        "source": str(path),
    }
    if "prompt" in data:
        if "{question}" not in str(data["prompt"]):
            raise UserError(f"template file {path}: 'prompt' must contain {{question}}")
        return Template(kind="text", text=str(data["prompt"]), **common)
    messages = data["messages"]
    if not isinstance(messages, list) or not all(
        isinstance(m, dict) and {"role", "content"} <= set(m) for m in messages
    ):
        raise UserError(f"template file {path}: 'messages' must be a list of {{role, content}} objects")
    if not any("{question}" in str(m["content"]) for m in messages):
        raise UserError(f"template file {path}: one message must contain {{question}}")
    return Template(kind="chat", messages=tuple((str(m["role"]), str(m["content"])) for m in messages), **common)


def _fill(text: str, question: str, instruction: str) -> str:
    # str.replace, not str.format: problems are full of LaTeX braces.
    return text.replace("{instruction}", instruction).replace("{question}", question)


def pick_shots(pool: Sequence[Any], exclude_id: str, k: int, seed: int = 0) -> list[Any]:
    """k problems with solutions from ``pool``, never ``exclude_id``. The same seeded order is
    used for every evaluated problem, so shots only differ when an item would be its own shot."""
    candidates = [p for p in pool if p.solution]
    order = list(range(len(candidates)))
    random.Random(seed).shuffle(order)
    chosen = [candidates[i] for i in order if candidates[i].id != exclude_id][:k]
    if len(chosen) < k:
        raise UserError(
            f"few-shot needs {k} solved examples besides the evaluated problem; the source has {len(chosen)}"
        )
    return chosen


def render(template: Template, question: str, instruction: str = "", shots: Sequence[Any] = ()) -> Prompt:
    """The prompt for one problem: a string, or chat messages for ``chat`` templates."""
    if template.kind == "text":
        return _fill(template.text, question, instruction)
    if template.kind == "chat":
        return [{"role": role, "content": _fill(content, question, instruction)} for role, content in template.messages]
    if template.kind == "fewshot":
        blocks = [f"Problem:\n{shot.question}\n\nSolution:\n{shot.solution}" for shot in shots]
        blocks.append(f"Problem:\n{question}\n\nSolution:\n")
        return SHOT_SEPARATOR.join(blocks)
    raise ValueError(f"unknown template kind {template.kind!r}")


def prompt_text(prompt: Prompt, tokenizer: Any) -> str:
    """A chat prompt through the model's own chat template (local backends need text)."""
    if isinstance(prompt, str):
        return prompt
    if tokenizer is None or not getattr(tokenizer, "chat_template", None):
        raise UserError(
            "the chat template needs a tokenizer with a chat_template; use --template qwen_math / r1 / no_template "
            "for this model"
        )
    return tokenizer.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True)
