"""Single-device train engine (CPU or one CUDA GPU): the reference implementation.

Owns: the train-engine interface every engine implements (`outputs` / `logprobs` without gradients,
`train_step(batch, loss_fn, micro_batch)`, `state_dict` / `load_state_dict` for resume), per-token
log-probabilities (and entropy) of completion tokens (the default forward; a critic passes its own,
see `trainer.critic`), micro-batched gradient accumulation, AdamW with linear warm-up and an optional linear / cosine decay, gradient clipping, optional bf16 autocast on CUDA, and the
reference model's log-probabilities. Does not own: what the loss is (the trainer passes a `loss_fn`),
checkpoint files (`engines.checkpoint`).

Positions: prompts are left-padded, so position ids are `cumsum(attention_mask) - 1`, exactly what
`generate` uses; otherwise recomputed log-probs would not match the sampler's.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from contextlib import nullcontext

import torch

from reasonrl import distributed as dist
from reasonrl.algorithms.logprobs import logprobs_and_entropy
from reasonrl.engines.output_head import decoder, head_logprobs
from reasonrl.models.loading import unwrapped
from reasonrl.types import TrainBatch, UpdateMetrics

LossFn = Callable[
    [TrainBatch, torch.Tensor, torch.Tensor | None], tuple[torch.Tensor, dict[str, torch.Tensor]]
]


def completion_logprobs(model, batch: TrainBatch, with_entropy: bool = False, autocast=nullcontext, chunk: int = 0,
                        entropy_grad: bool = True, temperature: float = 1.0):  # fmt: skip
    """(logprobs [B, T], entropy [B, T] or None) of the completion tokens under `model`, its logits
    divided by `temperature` (the rollouts' sampling temperature: `training_forward`). chunk > 0:
    from the last hidden states, `chunk` positions at a time (`chunked_logprobs`). entropy_grad=False:
    the entropy is a metric only (no entropy bonus), computed from detached logits so that its graph
    does not keep softmax-sized tensors alive through the backward pass."""
    if chunk > 0:
        pos = (batch.attention_mask.cumsum(-1) - 1).clamp_min(0)
        return chunked_logprobs(model, batch, pos, with_entropy, autocast, chunk, entropy_grad, temperature)
    logits = completion_logits(model, batch, autocast)
    return logprobs_and_entropy(logits, batch.input_ids[:, batch.prompt_len :], with_entropy, entropy_grad,
                                temperature)  # fmt: skip


def completion_logits(model, batch: TrainBatch, autocast=nullcontext) -> torch.Tensor:
    """The logits [B, T, V] that predict each completion token (position t's predict token t + 1)."""
    ids, attn, p = batch.input_ids, batch.attention_mask, batch.prompt_len
    pos = (attn.cumsum(-1) - 1).clamp_min(0)
    with autocast():
        logits = model(input_ids=ids, attention_mask=attn, position_ids=pos, use_cache=False).logits
    return logits[:, p - 1 : -1]


def _fsdp_root(model) -> bool:
    """The model (or the transformers model inside its peft wrapper) is an FSDP2 root module."""
    inner = unwrapped(model)
    return hasattr(inner, "reshard")


def chunked_logprobs(model, batch: TrainBatch, pos, with_entropy: bool, autocast, chunk: int,
                     entropy_grad: bool = True, temperature: float = 1.0):  # fmt: skip
    """Log-probs (and entropy) from the decoder's last hidden states through the output head, `chunk`
    completion positions at a time; with gradients each chunk's logits are recomputed in backward
    (activation checkpointing), so at most [B, chunk, V] logits exist at once instead of [B, T, V]."""
    ids, attn, p = batch.input_ids, batch.attention_mask, batch.prompt_len
    hidden = last_hidden(model, autocast, input_ids=ids, attention_mask=attn, position_ids=pos)
    return head_logprobs(
        model, hidden[:, p - 1 : -1], ids[:, p:], with_entropy, autocast, chunk, entropy_grad, temperature
    )


def last_hidden(model, autocast, **inputs) -> torch.Tensor:
    """The decoder's last hidden states (after the final norm: what the output head reads)."""
    with autocast():
        if _fsdp_root(model):  # through the root's forward, so FSDP2 gathers its own parameters (the
            # head among them: the root keeps them gathered after forward); the head runs on 1 position
            out = model(**inputs, use_cache=False, output_hidden_states=True, logits_to_keep=1)
            return out.hidden_states[-1]
        return decoder(model)(**inputs, use_cache=False)[0]


def training_forward(model_cfg, temperature: float = 1.0):
    """The log-prob forward `model.*` asks for: chunked (`logprob_chunk`), packed (`pack_tokens`, chunked
    too when both are set) or plain (None: the engine's default, `completion_logprobs`); with
    `model.compile`, torch.compile's failures in it become a ConfigError naming the key. `temperature`:
    `rollout.temperature`, so that the trainer's log-probs are those of the distribution the rollouts
    were sampled from (the policy, the old and the reference log-probs alike)."""
    if model_cfg.pack_tokens > 0:
        from reasonrl.engines.packing import packed_logprobs

        forward = functools.partial(
            packed_logprobs, pack_tokens=model_cfg.pack_tokens, chunk=model_cfg.logprob_chunk
        )
    elif model_cfg.logprob_chunk > 0:
        forward = functools.partial(completion_logprobs, chunk=model_cfg.logprob_chunk)
    else:
        forward = None
    if temperature != 1.0:
        forward = functools.partial(forward or completion_logprobs, temperature=temperature)
    if model_cfg.compile:
        from reasonrl.engines.compiled import naming_compile_failures

        forward = naming_compile_failures(forward or completion_logprobs)
    return forward


LR_SCHEDULES = ("constant", "linear", "cosine")


def lr_factor(step: int, warmup: int, total: int, schedule: str, min_ratio: float = 0.0) -> float:
    """Multiplier of the base learning rate at optimizer step `step` (0-based): linear warm-up over
    `warmup` steps, then constant, or a linear / cosine decay to `min_ratio` at step `total`."""
    if warmup and step < warmup:
        return (step + 1) / warmup
    if schedule == "constant" or total <= warmup:
        return 1.0
    progress = min(1.0, (step - warmup) / max(1, total - warmup))
    if schedule == "linear":
        shape = 1.0 - progress
    elif schedule == "cosine":
        shape = 0.5 * (1.0 + math.cos(math.pi * progress))
    else:
        raise ValueError(f"unknown lr schedule {schedule!r}; known: {', '.join(LR_SCHEDULES)}")
    return min_ratio + (1.0 - min_ratio) * shape


TOKENS = " tokens"  # the trained tokens' key among the diagnostics summed over ranks (no metric's name)


class SingleDeviceEngine:
    def __init__(
        self,
        model,
        *,
        lr: float,
        weight_decay: float = 0.0,
        betas: tuple[float, float] = (0.9, 0.999),
        warmup_steps: int = 0,
        lr_schedule: str = "constant",
        total_steps: int = 0,
        min_lr_ratio: float = 0.0,
        grad_clip: float = 1.0,
        bf16: bool = False,
        ref_model=None,
        forward: Callable = None,
        metric_prefix: str = "",
    ):
        self.model = model
        self.ref_model = ref_model
        self.ref_synced = False  # set by sync_reference: the reference is then part of the saved state
        # what one forward returns: (logprobs, entropy) of the completion tokens for a policy, or
        # (values,) for a critic; the loss function receives these after the micro-batch
        self.forward = forward or completion_logprobs
        self.metric_prefix = metric_prefix
        self.trim_padding = False  # cut each training micro-batch's unused padding (set by the trainer)
        self.micro_tokens = 0  # > 0: micro-batches of at most this many real tokens (train.micro_tokens)
        self.device = next(model.parameters()).device
        self.grad_clip = grad_clip
        self.optimizer = torch.optim.AdamW(
            [p for p in model.parameters() if p.requires_grad], lr=lr, weight_decay=weight_decay, betas=betas
        )
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer,
            functools.partial(
                lr_factor,
                warmup=max(int(warmup_steps), 0),
                total=total_steps,
                schedule=lr_schedule,
                min_ratio=min_lr_ratio,
            ),
        )
        use_bf16 = bf16 and self.device.type == "cuda"
        self._autocast = (lambda: torch.autocast("cuda", dtype=torch.bfloat16)) if use_bf16 else nullcontext

    def to_device(self, batch: TrainBatch) -> TrainBatch:
        if batch.input_ids.device == self.device:
            return batch
        fields = {k: getattr(batch, k) for k in batch.__dataclass_fields__}
        moved = {k: (v.to(self.device) if isinstance(v, torch.Tensor) else v) for k, v in fields.items()}
        return TrainBatch(**moved)

    @torch.no_grad()
    def outputs(
        self, batch: TrainBatch, micro_batch: int, reference: bool = False, with_entropy: bool = False,
        forward=None,
    ):  # fmt: skip
        """The forward's first output [B, T] (fp32, CPU), without gradients: log-probs of the completion
        tokens under the policy (or the reference model), or a critic's values. with_entropy: (log-probs,
        entropies), both [B, T], from the same forward. `forward`: another per-token forward of the same
        signature, run in the same micro-batches (`trainer.confidence`'s self-certainty)."""
        model = self.ref_model if reference else self.model
        if model is None:
            raise ValueError("no reference model loaded (algo.kl.coef is 0)")
        was_training = model.training
        model.eval()
        out, ents = [], []
        extra = {"with_entropy": True, "entropy_grad": False} if with_entropy else {}
        for rows in self.micro_rows(batch, micro_batch):
            micro = self.to_device(batch.select(rows or slice(0, 1)))
            outs = (forward or self.forward)(model, micro, autocast=self._autocast, **extra)
            if rows is not None:  # (None: a filler forward that keeps FSDP2 ranks in lock-step)
                out.append(outs[0].float().cpu())
                if with_entropy:
                    ents.append(outs[1].float().cpu())
        model.train(was_training)
        return (torch.cat(out), torch.cat(ents)) if with_entropy else torch.cat(out)

    logprobs = outputs

    def train_step(
        self,
        batch: TrainBatch,
        loss_fn: LossFn,
        micro_batch: int,
        with_entropy: bool = True,
        entropy_grad: bool = True,
    ) -> UpdateMetrics:
        """One optimizer step over `batch` in micro-batches. `loss_fn` must already be normalised by
        the whole batch's counts (see algorithms.masked.aggregate), so micro-batch losses just add.
        entropy_grad=False: the loss has no entropy term (the entropy is reported, not trained)."""
        self.model.train()
        totals: dict[str, torch.Tensor] = {}
        tokens = 0.0  # trained tokens of the micro-batches run: the diagnostics' weights
        for rows in self.micro_rows(batch, micro_batch):
            micro = batch.select(rows or slice(0, 1))
            micro = self.to_device(micro.trimmed() if self.trim_padding else micro)
            outs = self.forward(self.model, micro, with_entropy=with_entropy, autocast=self._autocast,
                                entropy_grad=entropy_grad)  # fmt: skip
            if rows is None:  # a filler: its forward and backward run (FSDP2's collectives), adding nothing
                (0.0 * outs[0].float().sum()).backward()
                continue
            loss, metrics = loss_fn(micro, *(None if o is None else o.float() for o in outs))
            loss.backward()
            weight = float(micro.mask.sum())
            tokens += weight
            for k, v in metrics.items():
                v = v.detach().float().cpu()
                if k.endswith("_max"):
                    totals[k] = torch.maximum(totals[k], v) if k in totals else v
                else:
                    totals[k] = totals.get(k, 0.0) + (v if k.startswith("loss/") else v * weight)
        grad_norm = self.clip_gradients()
        finite = bool(torch.isfinite(grad_norm))
        lr = self.optimizer.param_groups[0]["lr"]  # this update's (the scheduler then moves to the next's)
        if finite:  # a NaN / inf gradient (an overflow, a NaN loss) is dropped, not applied
            self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        # loss terms are normalised by the whole batch's counts, so they add over micro-batches (and
        # ranks, in `distributed.reduce_metrics`); `_max` ones are maxed; diagnostics (clip fractions,
        # entropy, ...) are token means within each micro-batch, so they are weighted by its trained
        # tokens, over every rank's micro-batches: the mean over the update's tokens (a micro-batch of
        # short answers does not count as much as one of long ones, one with no trained token not at all)
        out = {k: v for k, v in totals.items() if k.startswith("loss/") or k.endswith("_max")}
        weighted = {k: float(v) for k, v in totals.items() if k not in out}
        summed = dist.sum_over_ranks({**weighted, TOKENS: tokens})
        tokens = summed.pop(TOKENS)
        out = UpdateMetrics(out, token_means=frozenset(summed), tokens=tokens)
        out.update({k: torch.tensor(v / max(tokens, 1.0)) for k, v in summed.items()})
        out[self.metric_prefix + "grad_norm"] = grad_norm.detach().float().cpu()
        # 1 for an update dropped for its gradient (averaged over a step's updates: the share dropped)
        out[self.metric_prefix + "nonfinite_grad_frac"] = torch.tensor(0.0 if finite else 1.0)
        out[self.metric_prefix + "lr"] = torch.tensor(lr)
        return out

    def micro_rows(self, batch: TrainBatch, micro_batch: int) -> list[slice | None]:
        """The rows of each micro-batch, in order: `micro_batch` at a time, each ending early where
        `micro_tokens` > 0 and the next row's real tokens would pass it (a longer row runs alone). Every
        rank gets as many as the rank with the most; the extra ones are None (a one-row forward and
        backward that adds nothing, so FSDP2's collectives stay in lock-step)."""
        if self.micro_tokens > 0:
            from reasonrl.engines.packing import plan_packs

            tokens = batch.attention_mask.sum(-1).tolist()
            out = []
            for part in plan_packs(tokens, self.micro_tokens):
                out.extend(slice(part[s], part[min(s + micro_batch, len(part)) - 1] + 1)
                           for s in range(0, len(part), micro_batch))  # fmt: skip
        else:
            out = [slice(s, min(s + micro_batch, batch.size)) for s in range(0, batch.size, micro_batch)]
        return out + [None] * (dist.max_over_ranks(len(out)) - len(out))

    def clip_gradients(self) -> torch.Tensor:
        """Clip the gradients to `grad_clip` (total norm); returns the norm before clipping."""
        return torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.grad_clip)

    @torch.no_grad()
    def sync_reference(self, alpha: float) -> None:
        """reference <- alpha * policy + (1 - alpha) * reference, parameter by parameter (alpha 1: a copy
        of the policy, ProRL's reference reset; FSDP2: each rank updates its own shards, both models
        being sharded alike). From then on the reference is saved with the engine state."""
        if self.ref_model is None:
            raise ValueError("no reference model loaded (algo.kl.coef is 0)")
        own = dict(self.model.named_parameters())
        for name, ref in self.ref_model.named_parameters():
            policy = own[name].detach().to(ref.dtype)
            if alpha == 1.0:
                ref.copy_(policy)
            else:
                ref.mul_(1.0 - alpha).add_(policy, alpha=alpha)
        self.ref_synced = True

    @torch.no_grad()
    def reset_optimizer(self) -> None:
        """The optimizer's state back to a new optimizer's (ProRL's reset): every moment and step count
        zeroed in place (a zero AdamW state is exactly a fresh one's), so the state keeps its layout:
        FSDP2's shards and the checkpoint keys stay as they are. The learning-rate schedule goes on."""
        for state in self.optimizer.state.values():  # AdamW's: exp_avg, exp_avg_sq and step, all tensors
            for value in state.values():
                value.zero_()

    def reference_state(self) -> dict:
        """The reference model's full state on CPU (FSDP2's gathers it from the shards)."""
        return {k: v.detach().cpu().clone() for k, v in self.ref_model.state_dict().items()}

    def load_reference(self, state: dict) -> None:
        """Tensors by name, as either engine saves them (tied weights once or twice)."""
        from reasonrl.engines.weights import load_hf_weights

        load_hf_weights(self.ref_model, state)
        self.ref_synced = True

    def state_dict(self, optimizer: bool = True) -> dict:
        """Scheduler state and (optimizer=True) the optimizer state, for `load_state_dict`; the
        reference model's weights too once `sync_reference` has changed them."""
        out = {"scheduler": self.scheduler.state_dict()}
        if optimizer:
            out["optimizer"] = self.optimizer.state_dict()
        if self.ref_synced:
            out["reference"] = self.reference_state()
        return out

    def save_sharded_optimizer(self, path) -> None:
        """The optimizer state with torch.distributed.checkpoint: every rank writes its own shards
        (call on all ranks); `load_sharded_optimizer` reads it back on any number of ranks."""
        import torch.distributed.checkpoint as dcp
        from torch.distributed.checkpoint.state_dict import get_state_dict

        # get_state_dict (not get_optimizer_state_dict): the model's state_dict hooks first put FSDP2's
        # sharded parameters back in place, so optimizer entries map to parameter names
        dcp.save({"optim": get_state_dict(self.model, self.optimizer)[1]}, checkpoint_id=str(path))

    def load_sharded_optimizer(self, path) -> None:
        import torch.distributed.checkpoint as dcp
        from torch.distributed.checkpoint.state_dict import get_state_dict, set_optimizer_state_dict

        state = {"optim": get_state_dict(self.model, self.optimizer)[1]}
        dcp.load(state, checkpoint_id=str(path))
        set_optimizer_state_dict(self.model, self.optimizer, state["optim"])

    def load_state_dict(self, state: dict, keep_hyperparams: bool = False) -> None:
        """Restore optimizer moments and schedule position. keep_hyperparams: keep this engine's own
        lr / betas / weight decay / schedule (a resume that deliberately changed them) instead of the
        checkpoint's. A state without "optimizer" (a sharded checkpoint, read by
        `load_sharded_optimizer` first) keeps the optimizer as loaded."""
        if "reference" in state and self.ref_model is not None:  # a reference the run moved to the policy
            self.load_reference(state["reference"])
        if "optimizer" not in state:
            state = {**state, "optimizer": self.optimizer.state_dict()}
        if not keep_hyperparams:
            self.optimizer.load_state_dict(state["optimizer"])
            self.scheduler.load_state_dict(state["scheduler"])
            return
        groups = [{k: v for k, v in g.items() if k != "params"} for g in self.optimizer.param_groups]
        self.optimizer.load_state_dict(state["optimizer"])
        for g, mine in zip(self.optimizer.param_groups, groups):
            g.update(mine)
        self.scheduler.last_epoch = state["scheduler"]["last_epoch"]
        self.scheduler._step_count = state["scheduler"].get("_step_count", self.scheduler.last_epoch + 1)
        lrs = [
            base * lam(self.scheduler.last_epoch)
            for base, lam in zip(self.scheduler.base_lrs, self.scheduler.lr_lambdas)
        ]
        for g, lr in zip(self.optimizer.param_groups, lrs):
            g["lr"] = lr
        self.scheduler._last_lr = lrs
