"""Every example command in the README, the docs/ pages and the ``--help`` texts goes through the real parser,
and the ``rlvr train`` / ``rlvr eval`` ones through config resolution too (types, presets,
stages, data sources): an example a user copies never dies on its settings."""

import re
import shlex

import pytest
from doc_pages import doc_text, fenced_blocks
from rlvr.harness.config import resolve_config
from rlvr.harness.errors import UserError
from rlvr.harness.eval_config import EvalConfig

from rlvr.cli.main import build_parser


def _joined_lines(block: str) -> list[str]:
    """A code block's lines, stripped, with ``\\`` continuations joined into one."""
    lines, pending = [], ""
    for line in block.splitlines():
        line = pending + line.strip()
        pending = ""
        if line.endswith("\\"):
            pending = line[:-1] + " "
        else:
            lines.append(line)
    return lines


def _readme_examples() -> list[str]:
    commands = []
    for _, language, _, block in fenced_blocks():
        if language == "text":  # a program's output, not a command to run
            continue
        commands += [line for line in map(_after_torchrun, _joined_lines(block)) if line.startswith("rlvr ")]
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
        from rlvr.trainers.cli import resolve

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
            from rlvr.trainers.policy_gradient.plan import format_plan, training_plan

            cfg = resolve(args)
            assert "optimizer step" in format_plan(training_plan(cfg))
    if args.command == "eval":
        resolve_config(EvalConfig, args)


# ---- every README code block that can run here, run, and what it shows compared ---------------------------
def readme_blocks() -> list[tuple[str, int, str]]:
    """``(language, first line, text)`` of every fenced block of the README and the docs/ pages."""
    return [(lang, start, text) for _, lang, start, text in fenced_blocks()]


#: Python blocks that cannot run here as they stand (the block's first line -> why).
PYTHON_SKIP = {
    "from rlvr.sandbox.serving.rewards import trl_reward": "needs TRL's GRPOTrainer, a model and a dataset; "
    "tests/test_trl_grpo.py runs these adapters inside the real trainer",
    "from rlvr.harness.results import load_samples": "needs finished runs; tests/test_result_frames.py runs this block "
    "as written, on two evaluations",
}
#: Names a Python block uses as placeholders for the reader's own data (first line -> code run before it).
PYTHON_PRELUDE = {
    'verify_math("So the answer is 5."': "from rlvr.sandbox import verify_math\n",
    "from rlvr.sandbox import verify_math": 'completion = r"... the answer is \\boxed{4.2}"\n'
    'pairs = [(r"\\boxed{1}", "1"), ("so 2", "3")]\n',
    "from rlvr.sandbox import verify_code": "completion = '''```python\nclass Solution:\n"
    "    def finalPositionOfSnake(self, n, commands):\n        return 3\n"
    "def total(xs):\n    return sum(xs)\n```'''\n"
    'row = {"starter_code": "class Solution:\\n    def finalPositionOfSnake(self, n, commands):\\n        "}\n',
}


def shown_outputs(source: str) -> dict[int, object]:
    """Which expression statement (by line) shows which value: an inline comment that is a Python
    literal (``x.correct  # True``), or a run of standalone literal comment lines below statements
    (each line the value of one of the statements just before it, in order)."""
    import ast
    import io
    import tokenize

    exprs = sorted((n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Expr)), key=lambda n: n.lineno)
    lines = source.splitlines()
    comments = []
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            try:
                value = ast.literal_eval(tok.string[1:].strip())
            except (ValueError, SyntaxError):
                continue
            standalone = not lines[tok.start[0] - 1][: tok.start[1]].strip()
            comments.append((tok.start[0], value, standalone))
    shown: dict[int, object] = {}
    unassigned = list(exprs)
    index = 0
    while index < len(comments):
        line, value, standalone = comments[index]
        if not standalone:
            expr = next(e for e in exprs if e.lineno <= line <= e.end_lineno)
            shown[expr.lineno] = value
            unassigned.remove(expr)
            index += 1
            continue
        run = [comments[index]]
        while index + len(run) < len(comments):
            nxt = comments[index + len(run)]
            if not nxt[2] or nxt[0] != run[-1][0] + 1:
                break
            run.append(nxt)
        targets = [e for e in unassigned if e.end_lineno < line][-len(run) :]
        assert len(targets) == len(run), f"README line {line}: more shown values than statements above them"
        for expr, (_, value, _) in zip(targets, run):
            shown[expr.lineno] = value
            unassigned.remove(expr)
        index += len(run)
    return shown


def run_shown(source: str, prelude: str = "") -> tuple[dict[int, object], dict[int, object]]:
    """Run ``source`` (after ``prelude``) and return (shown values, the values its statements gave)."""
    import ast

    shown = shown_outputs(source)
    got: dict[int, object] = {}

    class Record(ast.NodeTransformer):
        def visit_Expr(self, node):
            if node.lineno in shown:
                call = ast.Call(ast.Name("_record", ast.Load()), [ast.Constant(node.lineno), node.value], [])
                return ast.copy_location(ast.Expr(call), node)
            return node

    tree = ast.fix_missing_locations(Record().visit(ast.parse(source)))
    namespace = {"_record": got.__setitem__}
    exec(compile(prelude, "prelude", "exec"), namespace)
    exec(compile(tree, "README.md", "exec"), namespace)
    return shown, got


PYTHON_BLOCKS = [(page, start, text) for page, lang, start, text in fenced_blocks() if lang == "python"]


@pytest.mark.parametrize("page, start, text", PYTHON_BLOCKS, ids=[f"{p}:{s}" for p, s, _ in PYTHON_BLOCKS])
def test_readme_python_block_runs_and_shows_what_it_says(page, start, text):
    first = text.splitlines()[0]
    skip = next((reason for key, reason in PYTHON_SKIP.items() if first.startswith(key)), None)
    if skip:
        pytest.skip(skip)
    prelude = next((code for key, code in PYTHON_PRELUDE.items() if first.startswith(key)), "")
    shown, got = run_shown(text, prelude)
    for line, value in shown.items():
        assert got.get(line) == value, f"{page}:{start + line - 1} shows {value!r}; it gives {got.get(line)!r}"


def test_the_readme_block_runner_compares_what_a_block_shows():
    shown, got = run_shown("x = 2\nx + 1  # 3\nx * 2\nx - 1\n# 4\n# 1\nprint('hi')  # a note\n")
    assert shown == {2: 3, 3: 4, 4: 1} and got == {2: 3, 3: 4, 4: 1}
    shown, got = run_shown("x = 2\nx  # 5\n")
    assert got[2] != shown[2]


#: Shell lines that are not run here: (how the line starts, why).
SHELL_SKIP = (
    ("make ", "installs into .venv and runs suites or the demo (minutes); `make test` is what CI runs"),
    ("python benchmarks/", "benchmarks run for minutes and print their own ratios"),
    ("ray start", "starts a Ray cluster; tests/test_ray_cluster.py runs a real one"),
    (
        "rlvr eval ",
        "generates with a model (minutes on a CPU); every example is parsed and resolved above, and "
        "tests/test_eval_run.py runs evaluations end to end",
    ),
    ("rlvr train ", "trains a model (minutes); parsed and resolved above; tests/test_trainers_e2e.py trains"),
    ("rlvr ablate ", "one evaluation per template (minutes); parsed above; tests/test_templates.py"),
    ("rlvr serve", "a server that runs until stopped; tests/test_server.py starts one"),
    ("curl ", "a request to a running `rlvr serve`: test_curl_requests_get_what_they_show sends each to the app"),
    (
        "torchrun ",
        "launches one training process per GPU; its `rlvr train` part is parsed, resolved and planned above, and "
        "tests/test_distributed.py runs torchrun with 2 ranks",
    ),
    ("rlvr grade --kind math --input c.jsonl --output v.jsonl --ray", "needs a Ray cluster at HEAD:6379"),
)


def _shell_lines() -> list[str]:
    lines = []
    for lang, _, text in readme_blocks():
        if lang in ("bash", "sh", "shell"):  # a comment line says, it does not run
            lines += [line for line in _joined_lines(text) if line and not line.startswith("#")]
    return lines


SHELL_LINES = _shell_lines()
SHELL_RUN = [c for c in SHELL_LINES if not any(c.startswith(prefix) for prefix, _ in SHELL_SKIP)]


def test_curl_requests_get_what_they_show():
    """Each documented ``curl`` request, sent to the real application, answers 200 with the
    fields its comment line shows (``# {"results":[{"id":1,"correct":true,...}]...}``)."""
    import json

    from fastapi.testclient import TestClient
    from rlvr.sandbox.serving.server import ServerConfig, create_app

    requests = []
    for _, lang, _, text in fenced_blocks():
        lines = text.splitlines()
        for index, line in enumerate(lines):
            if lang == "bash" and line.startswith("curl "):
                path, body = re.fullmatch(r"curl -s \S+?(/\S+) -d '(.*)'", line).groups()
                shown = lines[index + 1][2:] if index + 1 < len(lines) and lines[index + 1].startswith("# ") else ""
                requests.append((path, body, shown))
    assert requests
    with TestClient(create_app(ServerConfig(workers=1))) as client:
        for path, body, shown in requests:
            reply = client.post(path, content=body)
            assert reply.status_code == 200, reply.text
            got = json.dumps(reply.json(), separators=(",", ":"))
            for part in re.findall(r'"[a-z_]+":[^,{}\[\]]+', shown):  # each shown "key":value
                assert part in got, (part, got)


def test_every_readme_shell_line_is_run_or_skipped_with_a_reason():
    assert SHELL_RUN and all(c.startswith("rlvr ") for c in SHELL_RUN), SHELL_RUN
    assert len(SHELL_LINES) > len(SHELL_RUN) > 8


@pytest.fixture
def workspace(tmp_path, monkeypatch):
    """A folder with what the README's commands name: runs under results/, a completions file, training data."""
    import json

    from ux_helpers import make_run

    for name in ("RUN", "my-run", "A", "B"):
        make_run(tmp_path / "results", name)
    wrong = {"id": "gsm8k/0", "benchmark": "gsm8k", "sample_idx": 0, "prompt": "Janet...", "completion": "\\boxed{3}"}
    wrong.update(extracted="3", gold="18", correct=False, reward=0.0, reason="wrong_answer", detail="wrong_answer")
    with (tmp_path / "results" / "RUN" / "samples.jsonl").open("a") as fh:
        fh.write(json.dumps(wrong) + "\n")
    rows = [{"id": "a", "completion": "so \\boxed{2}", "answer": "2"}, {"id": "b", "completion": "3", "answer": "4"}]
    (tmp_path / "completions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "train.jsonl").write_text(json.dumps({"question": "What is 5 + 1?", "answer": "6"}) + "\n")
    import pandas

    pandas.DataFrame([{"problem": "Find x if 2x = 4.", "solution": "2"}]).to_parquet(tmp_path / "data.parquet")
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize("command", SHELL_RUN)
def test_readme_shell_line_runs_here(command, workspace, capsys):
    from rlvr.cli.main import main

    code = main(_argv(command))
    out, err = capsys.readouterr()
    assert code == 0, f"{command}\n{err}"
    if command.startswith("rlvr grade "):
        # the README shows the summary line of a larger file: the same line, other numbers
        shown = re.search(r"^graded \d+ rows: .*$", doc_text(), flags=re.M)[0]
        shape = re.sub(r"\d+(\.\d+)?", r"\\d+(\\.\\d+)?", re.escape(shown).replace("\\ ", " "))
        shape = shape.replace(", unparseable \\d+(\\.\\d+)?", "(, [a-z_]+ \\d+)*")
        assert re.fullmatch(shape, out.strip().splitlines()[-1]), (shown, out)


def test_readme_benchmark_sizes_are_what_rlvr_benchmarks_says():
    from rlvr.harness.benchmarks.registry import all_benchmarks, load_problems

    text = " ".join(doc_text().split())
    section = text[text.index("**Benchmarks** (`rlvr benchmarks`") :][:1500]
    claimed = dict(re.findall(r"`([a-z0-9_]+)` \((\d+)", section))
    assert len(claimed) >= 12
    for name, size in claimed.items():
        assert name in all_benchmarks(), name
        assert len(load_problems(name)) == int(size), name
