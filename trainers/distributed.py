"""Data-parallel training on ``torch.distributed``, launched by ``torchrun`` (one rank per device;
one node or several). ``rlvr train`` notices the launch (``WORLD_SIZE`` > 1, or any ``torchrun``)
and joins the ``env://`` process group: NCCL on CUDA, gloo on a CPU. A single process uses only
the resume helpers at the end (it can continue a sharded checkpoint); its own checkpoints are
unchanged.

What a rank does, and why N ranks make the update one process makes on the same batch:

* **Rollouts.** Every rank selects the step's prompts identically (same seeds, same selection
  state), generates and grades its share of *whole groups* (``owners``), then all ranks gather
  every group (token ids, texts, verdicts). Sample seeds depend on (run seed, step, prompt,
  sample), never on the rank, so the samples are those one process draws. Selection (DAPO's
  filter, SRPO's history) and the logged rollout metrics then see the whole step on every rank.
* **Rows that train here.** The global minibatch of ``minibatch_size`` rows (whole groups: it
  must be a multiple of ``group_size``) is split across the ranks by whole groups, so each
  optimizer step sees exactly the rows of the single-process minibatch. Each rank's part of a
  minibatch is padded with dummy rows (one attended token, nothing trained) to the largest part,
  so every rank runs the same number of micro-batches: forward/backward collectives (DDP's
  all-reduce, FSDP's all-gather / reduce-scatter) pair up across ranks.
* **Normalisation.** Token weights are computed locally (``trainers.losses.token_weights``) and
  rescaled by ``world_size · local denominator / global denominator``: the rows of the global
  minibatch (``seq_mean_token_mean``, Dr. GRPO's ``seq_mean_token_sum_norm``) or its tokens
  (``token_mean``), both all-reduced (SUM) once per update. DDP and FSDP *average* gradients
  over ranks; the factor ``world_size`` turns that average back into the sum, so the gradient is
  the single-process gradient. DDP syncs only on a minibatch's last micro-batch
  (``require_backward_grad_sync``, what ``no_sync`` sets), FSDP likewise
  (``set_requires_gradient_sync``).
* **Metrics.** Update totals (tokens, clip counts, KL, entropy, loss) are all-reduced (SUM); the
  grad norm is the global one (DDP: after the all-reduce; FSDP: ``DTensor.full_tensor``); rollout
  metrics come from the gathered groups; timings are the slowest rank's. Only rank 0 writes the
  log, ``config.yaml`` and progress lines; it alone runs ``eval_every`` evaluations.
* **Checkpoints.** ``checkpoint-<step>/`` holds the plain Hugging Face export (full state dict
  gathered to rank 0, ``save_pretrained``: what ``rlvr eval --model`` reads), ``trainer_state.pt``
  (step, scheduler, curriculum, selection, every rank's RNG) and ``dcp/``: model and optimizer
  sharded with ``torch.distributed.checkpoint`` (``get_state_dict`` / ``set_state_dict``).
  ``--resume`` reloads them exactly; DCP reshards, so another world size (or one process) resumes
  too, equal then up to floating-point summation order.
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
import shutil
import signal
import sys
import warnings
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any, Iterator, Sequence

import torch

#: test hook: ``RANK:STEP`` makes that rank exit (status 1) in that step, after generating
FAIL_ENV = "RLVR_TEST_FAIL_RANK_AT_STEP"
TIMEOUT_ENV = "RLVR_DIST_TIMEOUT_S"
DEFAULT_TIMEOUT_S = 1800
DCP_DIR = "dcp"

#: how ``trainers.losses.token_weights`` normalises each aggregation locally: by the rows of the
#: minibatch or by its tokens (a new mode must say which before it runs under torchrun)
LOCAL_DENOMINATOR = {"seq_mean_token_mean": "rows", "seq_mean_token_sum_norm": "rows", "token_mean": "tokens"}

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
        from harness.errors import UserError

        if cfg.minibatch_size is not None and cfg.minibatch_size % cfg.group_size:
            raise UserError(
                f"under torchrun minibatch_size ({cfg.minibatch_size}) must be a multiple of group_size "
                f"({cfg.group_size}): ranks split a minibatch by whole groups"
            )
        if LOCAL_DENOMINATOR.get(cfg.loss_agg) is None:
            raise UserError(f"loss_agg {cfg.loss_agg} has no distributed normalisation (trainers.distributed)")
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

    # -- checkpoints -----------------------------------------------------------------------------

    def save_checkpoint(
        self, out: Path, step: int, tokenizer: Any, optimizer: torch.optim.Optimizer | None, trainer: dict[str, Any]
    ) -> Path:
        """``out/checkpoint-<step>``: the HF export (rank 0), ``trainer_state.pt`` and the sharded
        ``dcp/``; written in a temporary directory renamed by rank 0 once every rank is done."""
        import torch.distributed.checkpoint as dcp
        from torch.distributed.checkpoint.state_dict import (
            StateDictOptions,
            get_model_state_dict,
            get_optimizer_state_dict,
        )

        from trainers.checkpoint import STATE_FILE, rng_state

        final = Path(out) / f"checkpoint-{step:06d}"
        tmp = final.with_name(final.name + ".tmp")
        model = self.train_model
        full = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
        if self.is_main:
            if tmp.exists():
                shutil.rmtree(tmp)
            tmp.mkdir(parents=True)
        self.barrier()
        state = {"model": get_model_state_dict(model)}
        if optimizer is not None:
            state["optim"] = get_optimizer_state_dict(model, optimizer)
        dcp.save(state, checkpoint_id=str(tmp / DCP_DIR), process_group=self.cpu_group)
        rngs = self.gather(rng_state())
        if self.is_main:
            plain = unwrap(model)
            plain.save_pretrained(tmp, state_dict=full, safe_serialization=True)
            tokenizer.save_pretrained(tmp)
            sharded = {"world_size": self.world, "parallel": self.parallel, "optimizer": optimizer is not None}
            torch.save(
                {"step": step, "rng": rngs[0], "rng_per_rank": rngs, "sharded": sharded, **trainer}, tmp / STATE_FILE
            )
            if final.exists():
                shutil.rmtree(final)
            tmp.rename(final)
            (Path(out) / "latest").write_text(final.name + "\n")
        self.barrier()
        return final

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


def split_groups(n_groups: int, per_minibatch: int, world: int) -> list[list[list[int]]]:
    """Minibatch j holds groups [j·per_minibatch, ...); its groups are cut into ``world`` contiguous
    parts as equal as possible (the larger parts rotate over the ranks from one minibatch to the next)."""
    out = []
    for j, start in enumerate(range(0, n_groups, per_minibatch)):
        indices = list(range(start, min(n_groups, start + per_minibatch)))
        base, extra = divmod(len(indices), world)
        sizes = [base + (1 if (r - j) % world < extra else 0) for r in range(world)]
        parts, at = [], 0
        for size in sizes:
            parts.append(indices[at : at + size])
            at += size
        out.append(parts)
    return out


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


class Shard:
    """This rank's rows of a step's batch: ``rows`` (global row indices, None = dummy) laid out as
    ``minibatches`` (equal slices on every rank) with ``real`` rows each; the update's hooks."""

    def __init__(self, ctx: Context, rows: list[int | None], minibatches: list[slice], real: list[int]):
        self.ctx, self.rows, self.minibatches, self.real = ctx, rows, minibatches, real

    def take(self, prompts: list, completions: list, advantages: torch.Tensor, keep: torch.Tensor, *per_token: Any):
        """The local rows; a dummy row is the first prompt with no completion, advantage 0, not kept.
        ``per_token``: more per-completion lists (e.g. the sampler's log-probs; None passes through),
        empty on a dummy row."""
        index = [r if r is not None else 0 for r in self.rows]
        dummy = torch.tensor([r is None for r in self.rows])

        def rows(column: Any) -> list | None:
            return None if column is None else [column[r] if r is not None else [] for r in self.rows]

        return (
            [prompts[i] for i in index],
            rows(completions),
            torch.where(dummy, torch.zeros(()), advantages[index].float()),
            torch.where(dummy, torch.zeros(()), keep[index].float()),
            *(rows(column) for column in per_token),
        )

    def scales(self, completion_mask: torch.Tensor, cfg: Any) -> list[float]:
        """Per minibatch: world · local denominator / global denominator (see the module docstring)."""
        tokens = [float(completion_mask[mb].sum()) for mb in self.minibatches]
        totals = self.ctx.all_reduce([float(n) for n in self.real] + tokens)
        n = len(self.minibatches)
        global_rows, global_tokens = totals[:n], totals[n:]
        kind = LOCAL_DENOMINATOR[cfg.loss_agg]
        out = []
        for j, mb in enumerate(self.minibatches):
            if kind == "rows":
                local, total = float(mb.stop - mb.start), max(global_rows[j], 1.0)
            else:
                local, total = max(tokens[j], 1.0), max(global_tokens[j], 1.0)
            out.append(self.ctx.world * local / total)
        return out

    def sync_gradients(self, model: torch.nn.Module, sync: bool) -> None:
        """Gradients cross ranks only on a minibatch's last micro-batch (set before its forward)."""
        if hasattr(model, "require_backward_grad_sync"):  # DDP: what no_sync() toggles
            model.require_backward_grad_sync = sync
        elif hasattr(model, "set_requires_gradient_sync"):  # FSDP2
            model.set_requires_gradient_sync(sync)

    def reduce_mismatch(self, sums: dict[str, float]) -> dict[str, float]:
        """``trainers.losses.mismatch_sums`` over every rank: sums added, ``ratio_max`` the max."""
        keys = sorted(k for k in sums if k != "ratio_max")
        summed = dict(zip(keys, self.ctx.all_reduce([sums[k] for k in keys])))
        summed["ratio_max"] = self.ctx.all_reduce([sums["ratio_max"]], op="max")[0]
        return summed

    def reduce(self, totals: dict[str, float]) -> dict[str, float]:
        """Totals summed over ranks; the loss carried the factor world_size, taken out here."""
        keys = sorted(totals)
        summed = dict(zip(keys, self.ctx.all_reduce([totals[k] for k in keys])))
        summed["loss"] = summed["loss"] / self.ctx.world
        return summed


def full_named_parameters(model: torch.nn.Module) -> Iterator[tuple[str, torch.Tensor]]:
    """``named_parameters`` with every FSDP shard gathered (one parameter at a time; a collective:
    every rank iterates in the same order), plain tensors as they are."""
    for name, param in unwrap(model).named_parameters():
        yield name, param.full_tensor() if hasattr(param, "full_tensor") else param


# -- resume --------------------------------------------------------------------------------------


def is_sharded(state: dict[str, Any]) -> bool:
    return "sharded" in state


def has_optimizer(state: dict[str, Any]) -> bool:
    return "optimizer" in state or bool(state.get("sharded", {}).get("optimizer"))


def load_sharded(checkpoint: Path, model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> None:
    """Model and optimizer from ``checkpoint/dcp`` (any world size, or one process: DCP reshards)."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

    model_state, optim_state = get_state_dict(model, optimizer)
    state = {"model": model_state, "optim": optim_state}
    group = _CONTEXT.cpu_group if _CONTEXT is not None else None
    no_dist = not torch.distributed.is_initialized()  # one process resuming: no group to plan with
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="torch.distributed is disabled")  # (one process: meant)
        dcp.load(state, checkpoint_id=str(Path(checkpoint) / DCP_DIR), process_group=group, no_dist=no_dist)
    set_state_dict(model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optim"])


def load_optimizer(state: dict[str, Any], checkpoint: Path, model: torch.nn.Module, optimizer: Any) -> None:
    """The optimizer (and, for a sharded checkpoint, the exact weights) of ``checkpoint``."""
    from harness.errors import UserError

    if is_sharded(state):
        load_sharded(checkpoint, model, optimizer)
        return
    if _CONTEXT is not None and _CONTEXT.parallel == "fsdp":
        raise UserError(
            f"--resume: {checkpoint} is a single-process checkpoint; continue it in one process or with parallel: ddp"
        )
    optimizer.load_state_dict(state["optimizer"])


def rank_rng(state: dict[str, Any]) -> dict[str, Any]:
    """This rank's saved RNG streams (rank 0's when the run had fewer ranks, or one process)."""
    per_rank = state.get("rng_per_rank")
    rank = _CONTEXT.rank if _CONTEXT is not None else 0
    return per_rank[rank] if per_rank and rank < len(per_rank) else state["rng"]


class NullLog:
    """The train log of ranks other than 0: they write nothing."""

    def write(self, step: int, metrics: dict[str, Any]) -> None:
        pass

    def close(self) -> None:
        pass
