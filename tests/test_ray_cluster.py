"""Grading, evaluation and populations on a real multi-node Ray cluster (head + worker node, local).

``ray.cluster_utils.Cluster`` starts real raylets (one per node) and a GCS on this machine; actors
are spread over both nodes, and the slow test removes the worker node mid-run.
"""

import json
import sys
import threading
import time
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")
from eval_helpers import rlvr, samples, summary  # noqa: E402
from ray.cluster_utils import Cluster  # noqa: E402
from rlvr.sandbox.service import GradingService, parse_item  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
from math_workloads import pairs  # noqa: E402

pytestmark = pytest.mark.slow

CODE_ITEMS = [
    {
        "kind": "code",
        "completion": "```python\nprint(int(input()) * 2)\n```",
        "tests": [{"input": "3\n", "output": "6\n"}],
    },
    {"kind": "code", "completion": "```python\nprint(5)\n```", "tests": [{"input": "3\n", "output": "6\n"}]},
    {"kind": "code", "completion": "```python\nwhile True: pass\n```", "tests": [{"input": "", "output": "1\n"}]},
]


@pytest.fixture(scope="module")
def cluster():
    nodes = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    worker = nodes.add_node(num_cpus=1)
    nodes.wait_for_nodes()
    ray.init(address=nodes.address, log_to_driver=False, logging_level="ERROR")
    nodes.worker_node = worker
    yield nodes
    ray.shutdown()
    nodes.shutdown()


def _key(row: dict) -> tuple:
    return tuple(row.get(k) for k in ("correct", "reward", "reason", "extracted", "detail", "verifier", "passed"))


def _in_process(rows: list[dict]) -> list[dict]:
    service = GradingService(workers=1, shards=1)
    try:
        return [v.to_dict() for v in service.grade([parse_item(r, i) for i, r in enumerate(rows)])]
    finally:
        service.close()


def test_grading_across_nodes_gives_the_in_process_verdicts(cluster):
    from rlvr.sandbox.serving.ray_grading import RayGrader

    rows = [{**p, "kind": "math"} for p in pairs(600, "reasoning")] + CODE_ITEMS
    grader = RayGrader(actors=2, chunk_items=64)
    try:
        nodes = {p["node"] for p in grader.placement()}
        got = grader.grade_rows(rows + [{"kind": "math", "completion": 3}])
    finally:
        grader.close()
    assert len(nodes) == 2  # one actor on the head, one on the worker node
    assert len(got) == len(rows) + 1 and got[-1]["reason"] == "bad_input"
    assert [_key(r) for r in got[:-1]] == [_key(r) for r in _in_process(rows)]
    assert [r["reason"] for r in got[-4:-1]] == ["ok", "wrong_answer", "time_limit"]


def test_trl_and_verl_adapters_grade_through_the_cluster(cluster):
    from rlvr.sandbox.serving.ray_grading import RayGrader
    from rlvr.sandbox.serving.rewards import compute_score_batch, trl_reward

    work = pairs(300, "short")
    completions, answers = [p["completion"] for p in work], [p["answer"] for p in work]
    grader = RayGrader(actors=2)
    try:
        on_ray = trl_reward("math", client=grader)(completions=completions, answer=answers)
        verl = compute_score_batch(["math500"] * len(work), completions, answers, client=grader)
    finally:
        grader.close()
    local = trl_reward("math", service=GradingService(workers=1, shards=1))(completions=completions, answer=answers)
    assert on_ray == local and [r["score"] for r in verl] == local and 0 < sum(local) < len(local)


def test_rlvr_grade_ray_matches_a_plain_run(cluster, tmp_path):
    source = tmp_path / "in.jsonl"
    source.write_text("".join(json.dumps(p) + "\n" for p in pairs(1500, "reasoning")) + "not json\n")
    plain = rlvr("grade", "--kind", "math", "--input", str(source), "--output", str(tmp_path / "a.jsonl"))
    on_ray = rlvr(
        "grade", "--kind", "math", "--input", str(source), "--output", str(tmp_path / "b.jsonl"),
        "--ray", cluster.address, "--no-progress",
    )  # fmt: skip
    assert plain.returncode == 0 and on_ray.returncode == 0, on_ray.stderr[-2000:]

    def rows(name):
        return [{k: v for k, v in json.loads(line).items() if k != "elapsed_ms"} for line in (tmp_path / name).open()]

    assert rows("a.jsonl") == rows("b.jsonl") and len(rows("b.jsonl")) == 1501
    assert "graded 1501 rows" in on_ray.stdout


def test_rlvr_grade_ray_unreachable_address_is_one_line(tmp_path):
    source = tmp_path / "in.jsonl"
    source.write_text(json.dumps({"completion": "\\boxed{1}", "answer": "1"}) + "\n")
    result = rlvr("grade", "--kind", "math", "--input", str(source), "--output", "-", "--ray", "127.0.0.1:1")
    assert result.returncode == 2
    assert "cannot reach the Ray cluster" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.slow
def test_eval_on_ray_writes_the_samples_of_a_plain_run_and_resumes(cluster, tmp_path, tiny_model, digits_source):
    common = [
        "eval", "--model", tiny_model, "--benchmarks", digits_source, "--kind", "math", "--n", "3",
        "--temperature", "0.8", "--max-tokens", "8", "--batch-size", "4", "--no-progress",
    ]  # fmt: skip
    plain = rlvr(*common, "--out", str(tmp_path / "plain"))
    assert plain.returncode == 0, plain.stderr[-2000:]
    on_ray = rlvr(*common, "--out", str(tmp_path / "ray"), "--ray", cluster.address, "--ray-actors", "2")
    assert on_ray.returncode == 0, on_ray.stderr[-2000:]

    def view(run):
        return sorted((r["id"], r["sample_idx"], r["seed"], r["completion"], r["correct"]) for r in samples(run))

    assert view(tmp_path / "plain") == view(tmp_path / "ray") and len(view(tmp_path / "ray")) == 45
    assert summary(tmp_path / "plain")["fingerprint"] == summary(tmp_path / "ray")["fingerprint"]
    a, b = summary(tmp_path / "plain")["benchmarks"], summary(tmp_path / "ray")["benchmarks"]
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)
    # a driver killed after writing part of the run: the same command generates only the rest
    log = tmp_path / "ray" / "samples.jsonl"
    log.write_text("".join(log.read_text().splitlines(keepends=True)[:20]))
    resumed = rlvr(*common, "--out", str(tmp_path / "ray"), "--ray", cluster.address, "--ray-actors", "2")
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert view(tmp_path / "ray") == view(tmp_path / "plain")
    assert summary(tmp_path / "ray")["timings"]["samples_resumed"] == 20


def test_population_on_ray_scores_like_this_process(cluster, tiny_model):
    from rlvr.harness.benchmarks.sources import resolve_source, source_instructions
    from rlvr.trainers.populations.perturb import Component
    from rlvr.trainers.populations.scoring import PopulationScorer

    problems = resolve_source("arith_train").problems[:3]
    args = (tiny_model, "chat", source_instructions(["arith_train"]), 8, 8, "float32", 0.0)
    specs = [[Component(1, 0.002)], [Component(2, 0.002, -1.0)], [Component(3, 0.004)], []]
    local = PopulationScorer(*args)
    on_ray = PopulationScorer(*args, workers=2, backend="ray")
    try:
        mine = local.score_many(specs, problems)
        theirs = on_ray.score_many(specs, problems)
        nodes = set(
            ray.get(
                [a.__ray_call__.remote(lambda self: ray.get_runtime_context().get_node_id()) for a in on_ray.ray_actors]
            )
        )
    finally:
        local.close()
        on_ray.close()
    assert [s.texts for s in mine] == [s.texts for s in theirs]
    assert [s.correct.tolist() for s in mine] == [s.correct.tolist() for s in theirs]
    assert len(nodes) == 2


@pytest.mark.slow
def test_worker_node_killed_mid_grading_loses_nothing_and_grades_nothing_twice(cluster):
    from rlvr.sandbox.serving.ray_grading import RayGrader

    rows = [{**p, "kind": "math"} for p in pairs(6000, "reasoning")]
    grader = RayGrader(actors=2, chunk_items=100)
    try:
        grader.placement()

        def kill_worker_node():
            time.sleep(0.4)
            cluster.remove_node(cluster.worker_node, allow_graceful=False)

        killer = threading.Thread(target=kill_worker_node)
        killer.start()
        got = grader.grade_rows(rows)
        killer.join()
        resent = grader.stats.resent
    finally:
        grader.close()
        cluster.worker_node = cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes()
    assert resent >= 1  # the node died with chunks in flight
    assert len(got) == len(rows)
    assert [_key(r) for r in got] == [_key(r) for r in _in_process(rows)]


@pytest.mark.slow
def test_reward_server_replicas_on_ray_serve(cluster):
    from ray import serve
    from rlvr.sandbox.serving.client import RewardClient
    from rlvr.sandbox.serving.ray_serve import run
    from rlvr.sandbox.serving.server import ServerConfig

    url = run(ServerConfig(port=18777), replicas=2, cpus_per_replica=0.5)
    try:
        work = pairs(200, "short")
        client = RewardClient(url)
        got = client.grade([{"kind": "math", **p} for p in work])
    finally:
        serve.shutdown()
    assert [_key(r) for r in got] == [_key(r) for r in _in_process([{"kind": "math", **p} for p in work])]


@pytest.mark.slow
def test_worker_node_killed_mid_eval_loses_no_sample_and_duplicates_none(cluster, tmp_path, tiny_model, digits_source):
    from rlvr.harness.eval_config import EvalConfig
    from rlvr.harness.evaluate import run_eval

    settings = dict(
        model=tiny_model, benchmarks=digits_source, kind="math", n=8, temperature=0.8, max_tokens=8,
        batch_size=2, progress=False,
    )  # fmt: skip
    plain = run_eval(EvalConfig(**settings, out=str(tmp_path / "plain")))
    log = tmp_path / "ray" / "samples.jsonl"

    def kill_when_writing():
        while not (log.exists() and log.read_text().count("\n") >= 4):
            time.sleep(0.05)
        cluster.remove_node(cluster.worker_node, allow_graceful=False)
        moments["killed"] = time.monotonic()

    moments: dict[str, float] = {}
    killer = threading.Thread(target=kill_when_writing, daemon=True)
    killer.start()
    try:
        on_ray = run_eval(EvalConfig(**settings, out=str(tmp_path / "ray"), ray=cluster.address, ray_actors=2))
        moments["finished"] = time.monotonic()
        killer.join(timeout=60)
    finally:
        cluster.worker_node = cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes()
    rows = samples(tmp_path / "ray")
    keys = [(r["id"], r["sample_idx"]) for r in rows]
    assert len(keys) == len(set(keys)) == 120  # every sample once
    assert sorted((r["id"], r["sample_idx"], r["completion"]) for r in rows) == sorted(
        (r["id"], r["sample_idx"], r["completion"]) for r in samples(tmp_path / "plain")
    )
    assert moments["killed"] < moments["finished"]  # the node died while the run was generating
    assert json.dumps(on_ray["benchmarks"], sort_keys=True) == json.dumps(plain["benchmarks"], sort_keys=True)


@pytest.mark.slow
def test_rlvr_train_randopt_on_ray_ranks_like_a_plain_run(cluster, tmp_path, tiny_model):
    tiny = ["--set", "support_size=4", "--set", "test_limit=4", "--set", "max_tokens=8", "--set", "backend=hf"]
    tiny.append("--no-progress")
    common = ["train", "randopt", "--config", "cpu-demo", "--model", tiny_model, "--population", "3", *tiny]
    plain = rlvr(*common, "--out", str(tmp_path / "plain"))
    on_ray = rlvr(
        *common, "--set", "backend=ray", "--set", "workers=2", "--out", str(tmp_path / "ray"),
        env={"RAY_ADDRESS": cluster.address},
    )  # fmt: skip
    assert plain.returncode == 0, plain.stderr[-3000:]
    assert on_ray.returncode == 0, on_ray.stderr[-3000:]

    def ranked(run):
        return json.loads((tmp_path / run / "population.json").read_text())

    assert ranked("plain") == ranked("ray") and len(ranked("ray")) == 3
    a, b = (json.loads((tmp_path / r / "report.json").read_text())["test"] for r in ("plain", "ray"))
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)
