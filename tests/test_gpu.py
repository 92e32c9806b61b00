"""GPU checks (``-m gpu``; skipped by default). Each runs one prepared script from benchmarks/
on a CUDA machine with vLLM installed and asserts it succeeds. Where no GPU is visible they skip
with that reason, so ``make test-all`` passes on a CPU machine."""

import subprocess
import sys

import pytest
from conftest import ROOT


def _no_gpu_reason() -> str | None:
    """Why these checks cannot run here (None: a CUDA GPU is visible to this interpreter's torch)."""
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    if not torch.cuda.is_available():
        return f"no CUDA GPU visible to torch {torch.__version__} (make test-gpu runs these on a GPU machine)"
    return None


pytestmark = [pytest.mark.gpu, pytest.mark.skipif(_no_gpu_reason() is not None, reason=str(_no_gpu_reason()))]


def _run(script: str, *args: str, timeout: int = 900) -> subprocess.CompletedProcess:
    result = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / script), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    print(result.stdout[-4000:])
    return result


def test_vllm_and_hf_backends_agree_on_format():
    result = _run("gpu_check_eval.py", "--prompts", "32", "--max-tokens", "64")
    assert result.returncode == 0, result.stderr[-3000:]
    assert '"rlvr_eval_vllm_rc": 0' in result.stdout


def test_vllm_checks_a_cpu_cannot_settle():
    """CUDA graphs with pushed weights, bf16 gap, two engines, multi-process mode, exact restore."""
    result = _run("gpu_check_vllm.py", timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert '"all_passed": true' in result.stdout


def test_torchrun_data_parallel_with_a_vllm_engine_per_rank():
    """DDP and FSDP2 over NCCL on the visible GPUs (1 or 2), bf16 compute, ``backend: vllm``:
    counts, sharded checkpoints, HF exports, step 1 against one process, a killed rank (2 GPUs)."""
    result = _run("gpu_check_distributed.py", timeout=1500)
    assert result.returncode == 0, result.stderr[-3000:]
    assert '"all_passed": true' in result.stdout


def test_vllm_sleeps_between_phases_and_a_run_with_every_memory_feature_trains():
    """vLLM sleep frees its share and wakes to the same greedy tokens (CUDA graphs on); a bf16
    run with checkpointing, chunked logits, a token budget and sleep trains two steps."""
    result = _run("gpu_check_train_memory.py", timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    assert '"all_passed": true' in result.stdout
