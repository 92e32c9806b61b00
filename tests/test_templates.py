"""Prompt templates: Dr. GRPO's three are byte-identical to the reference strings; few-shot never
shows the evaluated problem; template files; the chat template goes through the tokenizer."""

import re

import pytest
from conftest import ROOT
from rlvr.harness.benchmarks.registry import MATH_INSTRUCTION, load_problems
from rlvr.harness.errors import UserError
from rlvr.harness.evaluate import BenchmarkRun, build_prompt
from rlvr.harness.templates import BUILTIN, load_template, pick_shots, render

QUESTION = r"Let $f(x) = x^{2}$ and $\{a_n\}$ a sequence. Find $f(3)$."

# The reference strings, as written in docs/algorithms.md §2.5 (Dr. GRPO, understand-r1-zero).
R1 = (
    "A conversation between User and Assistant. The User asks a question, and the Assistant solves it. The Assistant "
    "first thinks about the reasoning process in the mind and then provides the User with the answer. The reasoning "
    "process is enclosed within <think> </think> and answer is enclosed within <answer> </answer> tags, respectively, "
    "i.e., <think> reasoning process here </think> <answer> answer here </answer>.\nUser: "
    + QUESTION
    + "\nAssistant: <think>"
)
QWEN_MATH = (
    "<|im_start|>system\nPlease reason step by step, and put your final answer within \\boxed{}.<|im_end|>\n"
    "<|im_start|>user\n" + QUESTION + "<|im_end|>\n<|im_start|>assistant\n"
)


def test_dr_grpo_templates_are_byte_identical():
    assert render(BUILTIN["r1"], QUESTION).encode() == R1.encode()
    assert render(BUILTIN["qwen_math"], QUESTION).encode() == QWEN_MATH.encode()
    assert render(BUILTIN["no_template"], QUESTION).encode() == QUESTION.encode()


def test_stop_rules_follow_dr_grpo():
    assert BUILTIN["r1"].stop == ("</answer>",) and BUILTIN["r1"].include_stop
    assert BUILTIN["qwen_math"].stop == () and BUILTIN["no_template"].stop == ()


def test_templates_match_the_reference_notes():
    notes = (ROOT / "docs" / "algorithms.md").read_text(encoding="utf-8")
    section = notes[notes.index("### 2.5") : notes.index("### 2.6")]
    blocks = re.findall(r"```\n(.*?)\n```", section, re.S)
    r1, qwen, bare = blocks[0], blocks[1] + "\n", blocks[2]  # "(A newline follows `assistant`.)"
    assert render(BUILTIN["r1"], "{question}") == r1
    assert render(BUILTIN["qwen_math"], "{question}") == qwen
    assert render(BUILTIN["no_template"], "{question}") == bare


def test_fewshot_never_includes_the_evaluated_problem():
    pool = load_problems("math500", 6)
    run = BenchmarkRun("math500", "math", pool, MATH_INSTRUCTION, pool)
    template = load_template("fewshot", shots=4)
    for problem in pool:
        prompt = build_prompt(template, run, problem)
        assert prompt.count("Problem:\n") == 5
        assert prompt.endswith(f"Problem:\n{problem.question}\n\nSolution:\n")
        assert prompt.count(problem.question) == 1
        assert "\\boxed" in prompt
    # shots are the same seeded choice for every problem that is not itself a shot
    shots = [s.id for s in pick_shots(pool, "none", 4)]
    outsider = [p for p in pool if p.id not in shots][0]
    assert [s.id for s in pick_shots(pool, outsider.id, 4)] == shots
    with pytest.raises(UserError, match="few-shot needs 4"):
        pick_shots(pool[:4], pool[0].id, 4)


def test_gsm8k_shots_end_in_a_boxed_answer_without_calculator_marks():
    problem = load_problems("gsm8k", 1)[0]
    assert "<<" not in problem.solution and problem.solution.endswith("\\boxed{18}$.")


def test_template_files(tmp_path):
    text = tmp_path / "mine.txt"
    text.write_text("Q: {question}\nA:")
    assert render(load_template(str(text)), "1+1?") == "Q: 1+1?\nA:"
    yml = tmp_path / "tagged.yaml"
    yml.write_text('name: tagged\nprompt: "<q>{question}</q>"\nstop: ["</a>"]\ninclude_stop: false\n')
    t = load_template(str(yml))
    assert (t.name, t.stop, t.include_stop) == ("tagged", ("</a>",), False)
    chat = tmp_path / "chat.json"
    chat.write_text(
        '{"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "{question} '
        '{instruction}"}]}'
    )
    assert render(load_template(str(chat)), "2+2?", "Box it.") == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "2+2? Box it."},
    ]
    assert load_template(str(yml)).identity()["hash"] != load_template(str(text)).identity()["hash"]
    for content, needle in (
        ("prompt: no placeholder", "must contain {question}"),
        ("[1, 2", "not valid"),
        ("stop: [x]", "exactly one of"),
    ):
        bad = tmp_path / "bad.yaml"
        bad.write_text(content)
        with pytest.raises(UserError, match=re.escape(needle)):
            load_template(str(bad))


def test_chat_template_uses_the_models_own_template():
    from rlvr.harness.backends.hf import encode_prompt
    from rlvr.harness.models import embedded_model_dir
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(embedded_model_dir())
    messages = render(BUILTIN["chat"], "What is 2+3?", MATH_INSTRUCTION)
    text, ids = encode_prompt(tokenizer, messages)
    assert text.startswith("<|im_start|>system\n") and text.endswith("<|im_start|>assistant\n")
    assert "What is 2+3?\n\nPlease reason step by step" in text
    assert tokenizer.decode(ids) == text
