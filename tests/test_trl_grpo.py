"""TRL's own GRPOTrainer runs two steps on the CPU (a tiny random model with the real tokenizer)
with our reward, in process and against a running `rlvr serve`: rewards arrive and the steps complete."""

import os

import pytest

pytest.importorskip("trl")

from datasets import Dataset  # noqa: E402
from rlvr.sandbox.service import GradingService  # noqa: E402
from rlvr.sandbox.serving.client import RewardClient  # noqa: E402
from rlvr.sandbox.serving.rewards import trl_reward  # noqa: E402
from server_helpers import Server  # noqa: E402
from trl import GRPOConfig, GRPOTrainer  # noqa: E402

PROMPTS = [("What is 2+3? Reply with just the number.", "5"), ("What is 4+4? Reply with just the number.", "8")]


def run_grpo(tmp_path, model, reward_fn):
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    dataset = Dataset.from_list([{"prompt": [{"role": "user", "content": q}], "answer": a} for q, a in PROMPTS])
    calls = []

    def reward(**kwargs):
        rewards = reward_fn(**kwargs)
        calls.append((list(kwargs["completions"]), list(kwargs["answer"]), rewards))
        return rewards

    reward.__name__ = "rlvr_math"
    config = GRPOConfig(
        output_dir=str(tmp_path),
        max_steps=2,
        per_device_train_batch_size=4,
        num_generations=4,
        max_completion_length=16,
        learning_rate=1e-6,
        logging_steps=1,
        report_to=[],
        save_strategy="no",
        bf16=False,
        use_cpu=True,
        seed=0,
    )
    trainer = GRPOTrainer(model=model, reward_funcs=[reward], args=config, train_dataset=dataset)
    trainer.train()
    return trainer, calls


def check(trainer, calls, reference):
    assert trainer.state.global_step == 2
    assert len(calls) == 2
    for completions, answers, rewards in calls:
        assert len(rewards) == len(completions) == 4
        assert all(isinstance(r, float) for r in rewards)
        assert rewards == reference(completions=completions, answer=answers)
    logged = [entry for entry in trainer.state.log_history if "rewards/rlvr_math/mean" in entry]
    assert len(logged) == 2


def test_grpo_two_steps_in_process(tmp_path, tiny_model):
    service = GradingService(workers=2)
    try:
        trainer, calls = run_grpo(tmp_path, tiny_model, trl_reward("math", policy="arith", service=service))
        check(trainer, calls, trl_reward("math", policy="arith", service=service))
    finally:
        service.close()


@pytest.mark.slow
def test_grpo_two_steps_against_the_server(tmp_path, tiny_model):
    server = Server()
    try:
        trainer, calls = run_grpo(
            tmp_path, tiny_model, trl_reward("math", policy="arith", client=RewardClient(server.url))
        )
        check(trainer, calls, trl_reward("math", policy="arith"))
    finally:
        server.stop()
