"""Data-parallel training on ``torch.distributed``, launched by ``torchrun`` (one rank per device;
one node or several). ``rlvr train`` notices the launch (``WORLD_SIZE`` > 1, or any ``torchrun``)
and joins the ``env://`` process group: NCCL on CUDA, gloo on a CPU. A single process uses only
``rlvr.trainers.runtime.distributed_checkpoint``'s resume helpers (it can continue a sharded checkpoint).

What a rank does, and why N ranks make the update one process makes on the same batch:

* **Rollouts.** Every rank selects the step's prompts identically (same seeds, same selection
  state), generates and grades its share of *whole groups* (``owners``), then all ranks gather
  every group (token ids, texts, verdicts). Sample seeds depend on (run seed, step, prompt,
  sample), never on the rank, so the samples are those one process draws. Selection (DAPO's
  filter, SRPO's history) and the logged rollout metrics then see the whole step on every rank.
* **Rows that train here, and their normalisation.** ``rlvr.trainers.policy_gradient.distributed_rows``: each rank
  trains its whole groups of the global minibatch, weighted so that the gradient is the
  single-process gradient.
* **Metrics.** Update totals (tokens, clip counts, KL, entropy, loss) are all-reduced (SUM); the
  grad norm is the global one (DDP: after the all-reduce; FSDP: ``DTensor.full_tensor``); rollout
  metrics come from the gathered groups; timings are the slowest rank's. Only rank 0 writes the
  log, ``config.yaml`` and progress lines; it alone runs ``eval_every`` evaluations.
* **Checkpoints.** ``rlvr.trainers.runtime.distributed_checkpoint``: the HF export, the trainer state and the
  sharded model and optimizer (DCP), which any world size (or one process) resumes.
* **Failures.** The process group has a timeout (``RLVR_DIST_TIMEOUT_S``, default 1800 s). A
  rank that dies makes torchrun's elastic agent stop the others (SIGTERM); a rank then prints
  one line and exits non-zero, as it does when a collective fails first. ``--resume`` continues
  from the last checkpoint.

``parallel: ddp`` wraps the policy in ``DistributedDataParallel`` (a full replica per rank);
``parallel: fsdp`` shards it with FSDP2 ``fully_shard`` per transformer block, then the root (and
the frozen reference likewise), with ``compute_dtype`` bfloat16 / float16 as
``MixedPrecisionPolicy(param_dtype=..., reduce_dtype=float32)``. Under FSDP the hf sampler runs on
unsharded weights (gathered once per rollout, then resharded); ``backend: vllm`` gives each rank
its own colocated engine for its share, synced from the full (gathered) parameters.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import sys
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Iterator, Sequence

import torch
from rlvr.trainers.policy_gradient.distributed_rows import Shard, split_groups

#: test hook: ``RANK:STEP`` makes that rank exit (status 1) in that step, after generating
FAIL_ENV = "RLVR_TEST_FAIL_RANK_AT_STEP"
TIMEOUT_ENV = "RLVR_DIST_TIMEOUT_S"
DEFAULT_TIMEOUT_S = 1800

_CONTEXT: Context | None = None


def launched() -> bool:
    """Started by torchrun (or another env:// launcher) with several ranks, or by torchrun at all."""
    world = os.environ.get("WORLD_SIZE")
    return world is not None and (int(world) > 1 or "TORCHELASTIC_RUN_ID" in os.environ)


def context() -> Context | None:
    """The running data-parallel context, None in a single process."""
    return _CONTEXT


def is_main() -> bool:
    return _CONTEXT is None or _CONTEXT.rank == 0


@contextlib.contextmanager
def session(cfg: Any) -> Iterator[Context | None]:
    """Join the process group for the block when launched by torchrun (else yield None). A failed
    collective or torchrun's SIGTERM (another rank died) ends this rank with one line, status 1."""
    global _CONTEXT
    if not launched():
        yield None
        return
    ctx = Context.start(cfg)
    _CONTEXT = ctx
    previous = signal.signal(signal.SIGTERM, ctx.terminated)
    failed = True
    try:
        yield ctx
        failed = False
    except Exception as exc:
        if isinstance(exc, torch.distributed.DistError) or (isinstance(exc, RuntimeError) and _is_comm_error(exc)):
            ctx.fail(f"a collective failed ({_first_line(exc)})")
        raise
    finally:
        signal.signal(signal.SIGTERM, previous)
        _CONTEXT = None
        if not failed:  # (after a failure another rank may never come: no teardown that waits on it)
            _teardown()


def _teardown() -> None:
    """Destroy the process group; a colocated vLLM engine's groups (built inside this world) first,
    so that its own shutdown at exit finds nothing left to destroy."""
    state = sys.modules.get("vllm.distributed.parallel_state")
    if state is not None:
        state.destroy_model_parallel()
        state.destroy_distributed_environment()
    if torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()


def _first_line(exc: BaseException) -> str:
    text = re.sub(r"^\[[^\]]*\]\s*", "", str(exc).strip())  # gloo's "[.../pair.cc:537] " prefix
    return text.splitlines()[0][:160] if text else type(exc).__name__


def _is_comm_error(exc: BaseException) -> bool:
    text = str(exc).lower()
    return any(k in text for k in ("gloo", "nccl", "connection", "timed out", "timeout", "broken pipe", "peer"))


def _visible_gpu_ids() -> list[str]:
    """GPU ids this node shows (CUDA_VISIBLE_DEVICES, else NVML's count), without starting CUDA."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return [v.strip() for v in visible.split(",") if v.strip() and v.strip() != "-1"]
    count = getattr(torch.cuda, "_device_count_nvml", lambda: -1)()
    return [str(i) for i in range(count)] if count and count > 0 else []


@dataclass
class Context:
    rank: int
    world: int
    local_rank: int
    device: str  # where batches live: "cpu" or "cuda" (this rank's GPU is the current device)
    backend: str
    parallel: str
    compute_dtype: str
    group_size: int
    minibatch_size: int | None
    train_model: Any = None
    #: small host-side collectives (gathered groups, metric sums, barriers, DCP's planning) go over
    #: gloo also under NCCL: no GPU round trips for them, and a dead peer fails them at once
    cpu_group: Any = None

    @classmethod
    def start(cls, cfg: Any) -> Context:
        from rlvr.harness.errors import UserError

        if cfg.minibatch_size is not None and cfg.minibatch_size % cfg.group_size:
            raise UserError(
                f"under torchrun minibatch_size ({cfg.minibatch_size}) must be a multiple of group_size "
                f"({cfg.group_size}): ranks split a minibatch by whole groups"
            )
        rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        local_rank = int(os.environ.get("LOCAL_RANK", 0))
        local_world = int(os.environ.get("LOCAL_WORLD_SIZE", world))
        use_cuda = False
        if cfg.device != "cpu":
            ids = _visible_gpu_ids()
            if ids and not torch.cuda.is_initialized():
                if local_world > len(ids):
                    raise UserError(
                        f"torchrun started {local_world} ranks on this node but {len(ids)} GPU(s) are visible: "
                        f"one rank per device (--nproc-per-node {len(ids)})"
                    )
                # this rank sees its own GPU only, as cuda:0 (a colocated vLLM engine then uses it too)
                os.environ["CUDA_VISIBLE_DEVICES"] = ids[local_rank]
            use_cuda = torch.cuda.is_available()
            if cfg.device.startswith("cuda") and not use_cuda:
                raise UserError("--device cuda but no CUDA GPU is visible; use --device cpu")
        if use_cuda:
            index = 0 if torch.cuda.device_count() == 1 else local_rank
            torch.cuda.set_device(index)
        timeout = timedelta(seconds=float(os.environ.get(TIMEOUT_ENV, DEFAULT_TIMEOUT_S)))
        backend = "nccl" if use_cuda else "gloo"
        torch.distributed.init_process_group(backend, timeout=timeout)
        cpu_group = torch.distributed.new_group(backend="gloo", timeout=timeout) if backend == "nccl" else None
        return cls(
            rank,
            world,
            local_rank,
            "cuda" if use_cuda else "cpu",
            backend,
            cfg.parallel,
            cfg.compute_dtype,
            cfg.group_size,
            cfg.minibatch_size,
            cpu_group=cpu_group,
        )

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    # -- lifecycle -------------------------------------------------------------------------------

    def terminated(self, signum: int, frame: Any) -> None:
        self.fail(f"stopped by signal {signum}: another rank failed (torchrun stops the group) or the run was stopped")

    def fail(self, why: str) -> None:
        print(
            f"rlvr train: error: rank {self.rank}/{self.world}: {why}; continue the run with --resume", file=sys.stderr
        )
        sys.stderr.flush()
        sys.stdout.flush()
        os._exit(1)  # the group may be broken: no teardown that could wait on the other ranks

    def barrier(self) -> None:
        torch.distributed.barrier(group=self.cpu_group)

    # -- models ----------------------------------------------------------------------------------

    def load_device(self) -> str:
        """Where the checkpoint is loaded: FSDP on a GPU loads on the CPU and moves shards only."""
        return "cpu" if self.parallel == "fsdp" else self.device

    def mixed_precision(self):
        from torch.distributed.fsdp import MixedPrecisionPolicy

        table = {"bfloat16": torch.bfloat16, "bf16": torch.bfloat16, "float16": torch.float16, "fp16": torch.float16}
        dtype = table.get(self.compute_dtype)
        return MixedPrecisionPolicy(param_dtype=dtype, reduce_dtype=torch.float32) if dtype else MixedPrecisionPolicy()

    def _shard(self, model: torch.nn.Module) -> torch.nn.Module:
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard

        mesh = init_device_mesh(self.device, (self.world,))
        policy = self.mixed_precision()
        for block in transformer_blocks(model):
            fully_shard(block, mesh=mesh, mp_policy=policy)
        fully_shard(model, mesh=mesh, mp_policy=policy)
        return model

    def wrap(self, model: torch.nn.Module) -> torch.nn.Module:
        """The module that trains: DDP around the policy, or the policy sharded in place (FSDP)."""
        if self.parallel == "fsdp":
            self.train_model = self._shard(model)
        else:
            from torch.nn.parallel import DistributedDataParallel

            ids = [torch.cuda.current_device()] if self.device == "cuda" else None
            self.train_model = DistributedDataParallel(model, device_ids=ids)
        return self.train_model

    def wrap_frozen(self, model: torch.nn.Module) -> torch.nn.Module:
        """The frozen reference: sharded like the policy under FSDP, a plain replica under DDP."""
        return self._shard(model) if self.parallel == "fsdp" else model

    @contextlib.contextmanager
    def unsharded(self, model: torch.nn.Module) -> Iterator[None]:
        """FSDP: the full weights stay gathered for the block, so ranks may run different numbers of
        forward passes (sampling); resharded after. A no-op under DDP."""
        modules = [m for m in model.modules() if hasattr(m, "unshard") and hasattr(m, "set_reshard_after_forward")]
        if self.parallel != "fsdp" or not modules:
            yield
            return
        for m in modules:
            m.set_reshard_after_forward(False, recurse=False)
            m.unshard()
        try:
            yield
        finally:
            for m in modules:
                m.reshard()
                m.set_reshard_after_forward(m is not model, recurse=False)  # FSDP's default: root keeps

    # -- rollouts and rows -----------------------------------------------------------------------

    def groups_per_minibatch(self, n_groups: int) -> int:
        return max(1, self.minibatch_size // self.group_size) if self.minibatch_size else max(1, n_groups)

    def blocks(self, n_groups: int) -> list[list[list[int]]]:
        """``blocks[j][r]``: global indices of the groups of minibatch j that rank r holds."""
        return split_groups(n_groups, self.groups_per_minibatch(n_groups), self.world)

    def owners(self, n_groups: int) -> list[int]:
        owner = [0] * n_groups
        for block in self.blocks(n_groups):
            for r, indices in enumerate(block):
                for i in indices:
                    owner[i] = r
        return owner

    def rollout(self, worker: Any, model: torch.nn.Module, unshard: bool) -> DistributedRollout:
        return DistributedRollout(self, worker, model, unshard)

    def shard(self, n_groups: int) -> Shard:
        """This rank's rows of the step's ``n_groups`` groups (global row order), per minibatch,
        padded to the largest rank's part (``None`` = a dummy row)."""
        rows: list[int | None] = []
        minibatches, real = [], []
        for block in self.blocks(n_groups):
            width = max(len(part) for part in block) * self.group_size
            mine = [i * self.group_size + k for i in block[self.rank] for k in range(self.group_size)]
            minibatches.append(slice(len(rows), len(rows) + width))
            real.append(len(mine))
            rows += mine + [None] * (width - len(mine))
        return Shard(self, rows, minibatches, real)

    def gather(self, value: Any) -> list[Any]:
        out: list[Any] = [None] * self.world
        torch.distributed.all_gather_object(out, value, group=self.cpu_group)
        return out

    def all_reduce(self, values: Sequence[float], op: str = "sum") -> list[float]:
        tensor = torch.tensor(list(values), dtype=torch.float64)
        reduce_op = {"sum": torch.distributed.ReduceOp.SUM, "max": torch.distributed.ReduceOp.MAX}[op]
        torch.distributed.all_reduce(tensor, op=reduce_op, group=self.cpu_group)
        return tensor.tolist()

    # -- rollout metrics -------------------------------------------------------------------------

    def max_times(self, times: dict[str, float]) -> dict[str, float]:
        keys = sorted(times)
        return dict(zip(keys, self.all_reduce([times[k] for k in keys], "max")))


def unwrap(model: torch.nn.Module) -> torch.nn.Module:
    return getattr(model, "module", model)


def transformer_blocks(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The model's repeated blocks (HF ``_no_split_modules`` classes, else the largest ModuleList)."""
    names = set(getattr(model, "_no_split_modules", None) or [])
    blocks = [m for m in model.modules() if type(m).__name__ in names]
    if blocks:
        return blocks
    lists = [m for m in model.modules() if isinstance(m, torch.nn.ModuleList)]
    return list(max(lists, key=len)) if lists else []


class DistributedRollout:
    """The rollout worker of one rank: its share of each prompt list (whole groups) generated and
    graded here, then every group gathered on every rank in the list's order."""

    def __init__(self, ctx: Context, worker: Any, model: torch.nn.Module, unshard: bool):
        self.ctx, self.worker, self.model, self.unshard = ctx, worker, model, unshard
        self.group_size = worker.group_size
        self.generations = 0
        spec = os.environ.get(FAIL_ENV)
        self.fail_at = tuple(int(x) for x in spec.split(":")) if spec else None

    def __call__(self, problems: Sequence[Any], key: int) -> list:
        if not problems:
            return []
        owners = self.ctx.owners(len(problems))
        mine = [p for p, owner in zip(problems, owners) if owner == self.ctx.rank]
        with self.ctx.unsharded(self.model) if self.unshard else contextlib.nullcontext():
            local = self.worker(mine, key)
        if self.fail_at == (self.ctx.rank, key):
            print(f"rank {self.ctx.rank}: {FAIL_ENV}: exiting in step {key} (test hook)", file=sys.stderr, flush=True)
            os._exit(1)
        parts = [iter(part) for part in self.ctx.gather(local)]
        groups = [next(parts[owner]) for owner in owners]
        self.generations += sum(len(g.completion_ids) for g in groups)
        return groups

    def take_times(self) -> dict[str, float]:
        return self.ctx.max_times(self.worker.take_times())


def full_named_parameters(model: torch.nn.Module) -> Iterator[tuple[str, torch.Tensor]]:
    """``named_parameters`` with every FSDP shard gathered (one parameter at a time; a collective:
    every rank iterates in the same order), plain tensors as they are."""
    for name, param in unwrap(model).named_parameters():
        yield name, param.full_tensor() if hasattr(param, "full_tensor") else param


class NullLog:
    """The train log of ranks other than 0: they write nothing."""

    def write(self, step: int, metrics: dict[str, Any]) -> None:
        pass

    def close(self) -> None:
        pass
