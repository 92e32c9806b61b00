"""Reward adapters for TRL, verl and OpenRLHF: in process and remote give the same rewards."""

import asyncio
import json
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from rlvr.sandbox.service import GradingService
from rlvr.sandbox.serving.client import RewardClient
from rlvr.sandbox.serving.rewards import compute_score, compute_score_batch, reward_func, trl_reward, trl_reward_async

COMPLETIONS = [r"so \boxed{4}", r"so \boxed{5}", r"\boxed{9^{9^{9^{9}}}}", "no answer here at all"]
ANSWERS = ["4", "4", "1", "4"]
CHAT = [[{"role": "assistant", "content": c}] for c in COMPLETIONS]
CODE_TESTS = [[{"input": "1\n2", "output": "3", "testtype": "functional"}]] * 2
CODE = ["```python\ndef add(a, b):\n    return a + b\n```", "```python\ndef add(a, b):\n    return a - b\n```"]


def test_trl_strings_and_chat_messages():
    fn = trl_reward()
    assert fn.__name__ == "rlvr_auto_reward"
    assert fn(
        prompts=["p"] * 4, completions=COMPLETIONS, completion_ids=[[1]] * 4, answer=ANSWERS, trainer_state=None
    ) == [1.0, 0.0, 0.0, 0.0]
    assert fn(prompts=["p"] * 4, completions=CHAT, answer=ANSWERS) == [1.0, 0.0, 0.0, 0.0]


def test_trl_column_detection_and_code_columns():
    assert trl_reward()(completions=COMPLETIONS[:2], solution=["4", "4"]) == [1.0, 0.0]
    assert trl_reward(answer_key="gold_value")(completions=COMPLETIONS[:2], gold_value=["4", "5"]) == [1.0, 1.0]
    assert trl_reward()(completions=CODE, tests=CODE_TESTS, fn_name=["add", "add"]) == [1.0, 0.0]
    with pytest.raises(ValueError, match="answer_key"):
        trl_reward()(completions=COMPLETIONS[:1], unrelated=["x"])


def test_trl_masks_unverifiable_only_when_asked():
    service = GradingService(workers=1, math_timeout=0.005)
    try:
        hard = [r"\boxed{\frac{\omega_{n}^{2}}{\sqrt{1-\zeta^{2}}} e^{-\zeta t} \lfloor \sin(\omega_n t) \rfloor}"]
        gold = [r"\lfloor \omega_n t \rfloor"]
        assert trl_reward(service=service, mask_unverifiable=True)(completions=hard, answer=gold) == [None]
        assert trl_reward(service=service)(completions=hard, answer=gold) == [0.0]
        assert trl_reward(service=service, mask_unverifiable=True)(completions=[r"\boxed{3}"], answer=["4"]) == [0.0]
    finally:
        service.close()


def test_trl_async_and_threads():
    fn = trl_reward_async()

    async def main():
        return await asyncio.gather(*(fn(completions=COMPLETIONS, answer=ANSWERS) for _ in range(4)))

    assert all(r == [1.0, 0.0, 0.0, 0.0] for r in asyncio.run(main()))
    sync = trl_reward()
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda _: sync(completions=COMPLETIONS, answer=ANSWERS), range(8)))
    assert all(r == [1.0, 0.0, 0.0, 0.0] for r in results)


def test_verl_signatures_and_dispatch():
    assert compute_score("lighteval/MATH", r"\boxed{2\sqrt{3}}", r"\sqrt{12}") == {
        "score": 1.0,
        "acc": 1.0,
        "verifiable": 1.0,
        "timeout": 0.0,
    }
    assert compute_score("openai/gsm8k", "She has 18 apples.\n#### 18", "18")["score"] == 1.0
    assert (
        compute_score("openai/gsm8k", "so the total is 18 apples", "18")["score"] == 1.0
    )  # gsm8k allows the last number
    assert compute_score("lighteval/MATH", "so the total is 18 apples", "18")["score"] == 0.0
    assert compute_score("minerva_math", r"\boxed{27.3912}", "27.39")["score"] == 1.0
    spec = json.dumps({"inputs": ["1\n"], "outputs": ["2\n"]})
    assert compute_score("livecodebench", "```python\nprint(int(input()) + 1)\n```", spec)["score"] == 1.0
    assert (
        compute_score(
            "custom",
            "```python\nprint(int(input()) + 1)\n```",
            None,
            {"kind": "code", "tests": [{"input": "1", "output": "2"}]},
        )["score"]
        == 1.0
    )
    batch = compute_score_batch(
        ["gsm8k", "math", "apps"],
        ["#### 3", r"\boxed{x}", "```python\nprint(1)\n```"],
        ["3", "5", {"inputs": [""], "outputs": ["1\n"]}],
        [None, None, None],
    )
    assert [b["score"] for b in batch] == [1.0, 0.0, 1.0]
    assert all(isinstance(v, float) for b in batch for v in b.values())


def test_verl_loads_and_calls_us_through_its_own_reward_loader():
    omegaconf = pytest.importorskip("omegaconf")
    reward_module = pytest.importorskip("verl.trainer.ppo.reward")
    import rlvr.sandbox.serving.rewards as rewards

    config = omegaconf.OmegaConf.create(
        {"reward": {"custom_reward_function": {"path": rewards.__file__, "name": "compute_score", "reward_kwargs": {}}}}
    )
    fn = reward_module.get_custom_reward_fn(config)
    assert (
        fn(data_source="lighteval/MATH", solution_str=r"\boxed{\frac{1}{2}}", ground_truth="0.5", extra_info={})[
            "score"
        ]
        == 1.0
    )
    config = omegaconf.OmegaConf.create(
        {"reward": {"custom_reward_function": {"path": rewards.__file__, "name": "compute_score_batch"}}}
    )
    batch = reward_module.get_custom_reward_fn(config)
    out = batch(
        data_sources=["gsm8k", "gsm8k"],
        solution_strs=["#### 7", "#### 8"],
        ground_truths=["7", "7"],
        extra_infos=[{}, {}],
    )
    assert [o["score"] for o in out] == [1.0, 0.0]


def test_openrlhf_reward_function_file_form():
    prompt = "<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n"
    out = reward_func([prompt + r"\boxed{4}<|im_end|>", prompt + r"\boxed{3}</s>"], [prompt, prompt], ["4", "4"])
    assert out["rewards"].tolist() == [1.0, 0.0] and out["scores"].tolist() == [1.0, 0.0]
    assert out["extra_logs"]["acc"].tolist() == [1.0, 0.0]


def test_remote_equals_local(server):
    client = RewardClient(server.url)
    local = trl_reward()(completions=COMPLETIONS, answer=ANSWERS)
    remote = trl_reward(client=client)(completions=COMPLETIONS, answer=ANSWERS)
    assert local == remote
    code_local = trl_reward()(completions=CODE, tests=CODE_TESTS, fn_name=["add", "add"])
    code_remote = trl_reward(client=client)(completions=CODE, tests=CODE_TESTS, fn_name=["add", "add"])
    assert code_local == code_remote == [1.0, 0.0]
    assert compute_score("gsm8k", "#### 3", "3", client=client) == compute_score("gsm8k", "#### 3", "3")


def test_openrlhf_client_behaviour(server):
    """OpenRLHF's client: one sample per request, 180 s total timeout, 5 tries 1 s apart."""

    async def openrlhf_style(query, prompt, label):
        async with httpx.AsyncClient(timeout=180) as session:
            for attempt in range(5):
                try:
                    response = await session.post(
                        server.url + "/get_reward", json={"query": [query], "prompts": [prompt], "labels": [label]}
                    )
                    response.raise_for_status()
                    return response.json()
                except httpx.HTTPError:
                    if attempt == 4:
                        raise
                    await asyncio.sleep(1)

    prompt = "<|im_start|>user\nWhat is 6*7?<|im_end|>\n<|im_start|>assistant\n"
    samples = [(prompt + rf"\boxed{{{v}}}<|im_end|>", prompt, "42") for v in (42, 41, 42, 6 * 7, 43, 42)]

    async def main():
        return await asyncio.gather(*(openrlhf_style(*s) for s in samples))

    results = asyncio.run(main())
    assert [r["rewards"][0] for r in results] == [1.0, 0.0, 1.0, 1.0, 0.0, 1.0]
    assert all(r["scores"] == r["rewards"] and "extra_logs" in r for r in results)
