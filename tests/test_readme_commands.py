"""Every example command in the README and in the ``--help`` texts goes through the real parser,
and the ``rlvr train`` / ``rlvr eval`` ones through config resolution too (types, presets,
stages, data sources): an example a user copies never dies on its settings."""

import re
import shlex

import pytest
from conftest import ROOT

from harness.cli import build_parser
from harness.config import resolve_config
from harness.errors import UserError
from harness.eval_config import EvalConfig


def _readme_examples() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    commands = []
    for language, block in re.findall(r"```([a-z]*)\n(.*?)```", text, flags=re.S):
        if language == "text":  # a program's output, not a command to run
            continue
        pending = ""
        for line in block.splitlines():
            line = pending + line.strip()
            pending = ""
            if line.endswith("\\"):
                pending = line[:-1] + " "
                continue
            line = _after_torchrun(line)
            if line.startswith("rlvr "):
                commands.append(line)
    return commands


def _help_examples() -> list[str]:
    parser = build_parser()
    texts = [parser.epilog or ""]
    subparsers = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    texts += [p.epilog or "" for p in subparsers.choices.values()]
    text = re.sub(r"\\\n\s*", "", "\n".join(texts))
    lines = [_after_torchrun(line.strip()) for line in text.splitlines()]
    return [re.split(r"\s{2,}", line)[0] for line in lines if line.startswith("rlvr ")]


def _after_torchrun(line: str) -> str:
    """``torchrun ... --no-python rlvr train ...`` is checked as its ``rlvr train ...`` part."""
    return line[line.index(" rlvr ") + 1 :] if line.startswith("torchrun ") and " rlvr " in line else line


def _argv(command: str) -> list[str]:
    """The command as argv: comments and ``[optional]`` synopsis groups dropped."""
    command = re.sub(r"\s+#.*$", "", command)
    command = re.sub(r"\s*\[--[^\]]*\]", "", command)
    return shlex.split(command)[1:]


EXAMPLES = sorted(set(_readme_examples()) | set(_help_examples()))


def test_the_examples_were_found():
    train = [c for c in EXAMPLES if c.startswith("rlvr train ")]
    assert len(EXAMPLES) > 30 and any("--set lr=1e-5" in c for c in train)


@pytest.mark.parametrize("command", [c for c in EXAMPLES if "<" not in c])
def test_example_parses_and_resolves(command, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # relative --out paths land here; nothing runs
    args = build_parser().parse_args(_argv(command))
    config = getattr(args, "config", None)
    if config and config.endswith((".yaml", ".yml")):
        return
    if args.command == "train":
        from trainers.cli import resolve

        # The user's own data (the paper presets train on the paper's set): an absent file is the
        # one clear error below; with the file in place the example resolves.
        for _ in range(3):
            try:
                resolve(args)
                break
            except UserError as exc:
                missing = re.search(r"names (\S+\.jsonl), which does not exist", str(exc))
                if not missing:
                    raise
                (tmp_path / missing[1]).parent.mkdir(parents=True, exist_ok=True)
                (tmp_path / missing[1]).write_text('{"question": "1+1?", "answer": "2"}\n')
        else:
            pytest.fail(f"{command}: still missing data after three files")
        if args.algorithm in ("grpo", "drgrpo", "dapo", "srpo"):  # launch commands plan, too
            from trainers.plan import format_plan, training_plan

            cfg = resolve(args)
            assert "optimizer step" in format_plan(training_plan(cfg))
    if args.command == "eval":
        resolve_config(EvalConfig, args)
