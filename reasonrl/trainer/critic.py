"""The critic (value model) for PPO with GAE: a value head on the policy architecture, trained as a
second train engine (the same `SingleDeviceEngine`, with the value forward instead of log-probs).

Owns: `Critic` (values V(s_t) of the completion positions, one clipped value-loss update per
mini-batch, its state for checkpoints), `completion_values` and `build_critic` (from the config). The model is
`AutoModelForTokenClassification(num_labels=1, classifier_dropout=0)` loaded from `algo.critic.model` (default: the
policy's own checkpoint), i.e. a separate copy of the policy backbone with a fresh linear head, as in
verl / OpenRLHF (a reward model's head where `algo.critic.model` is one: a sequence classifier's `score`,
or an OpenRLHF reward model's value head under its config's `value_head_prefix`). Does not own: GAE (`algorithms.advantages.gae`), the value-loss formula
(`algorithms.value.value_loss`) or checkpoint files (the loop stores `Critic.state_dict()` in the
engine state).

Alignment: V at completion position t is the head's output at the position that predicts token t
(the last prompt token for t = 0), exactly the positions whose logits give `logprobs`.
Loss: token_mean of the clipped value loss over the mini-batch's trainable tokens (normalised by the
whole mini-batch's token count, so micro-batches add up), one AdamW step, gradient clipping.
Metrics: `loss/value` and `critic/{vf_clipfrac, value_mean, value_error, explained_var, grad_norm,
nonfinite_grad_frac}`.
Single device only (the critic lives on the policy's device).
"""

from __future__ import annotations

import re
from contextlib import nullcontext

import torch

from reasonrl.algorithms.masked import aggregate
from reasonrl.algorithms.value import value_loss
from reasonrl.engines.single import SingleDeviceEngine
from reasonrl.types import TrainBatch


def completion_values(model, batch: TrainBatch, with_entropy: bool = False, autocast=nullcontext,
                      entropy_grad: bool = False):  # fmt: skip
    """(values [B, T],): the value head at the positions that predict each completion token."""
    ids, attn = batch.input_ids, batch.attention_mask
    pos = (attn.cumsum(-1) - 1).clamp_min(0)
    with autocast():
        out = model(input_ids=ids, attention_mask=attn, position_ids=pos, use_cache=False).logits
    return (out[:, batch.prompt_len - 1 : -1, 0],)


class Critic:
    """The value model as a second train engine (`SingleDeviceEngine` with the value forward)."""

    def __init__(
        self, model, *, lr: float, betas=(0.9, 0.999), weight_decay: float = 0.0, grad_clip: float = 1.0
    ):
        self.engine = SingleDeviceEngine(model, lr=lr, betas=tuple(betas), weight_decay=weight_decay,
                                         grad_clip=grad_clip, forward=completion_values,
                                         metric_prefix="critic/")  # fmt: skip
        self.model = model

    def values(self, batch: TrainBatch, micro_batch: int) -> torch.Tensor:
        """V [B, T] (fp32, CPU) of the completion positions under the current critic."""
        return self.engine.outputs(batch, micro_batch)

    def train_step(
        self, batch: TrainBatch, micro_batch: int, clip_range: float | None
    ) -> dict[str, torch.Tensor]:
        """One optimizer step on `batch` (a mini-batch holding `values` and `returns`)."""
        total_tokens = batch.mask.sum()

        def loss_fn(micro: TrainBatch, values: torch.Tensor):
            mask = micro.mask
            tok, metrics = value_loss(values, micro.values, micro.returns, mask, clip_range=clip_range)
            loss = aggregate(tok, mask, "token_mean", total_tokens=total_tokens.to(values.device))
            return loss, {"loss/value": loss.detach(), **{f"critic/{k}": v for k, v in metrics.items()}}

        out = self.engine.train_step(batch, loss_fn, micro_batch, with_entropy=False)
        out.pop("critic/lr", None)  # constant: the critic has no schedule
        return out

    def state_dict(self) -> dict:
        return {"model": self.model.state_dict(), **self.engine.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        self.model.load_state_dict(state["model"])
        if "scheduler" in state:
            self.engine.load_state_dict(state)
        else:  # checkpoints written before the critic was an engine
            self.engine.optimizer.load_state_dict(state["optimizer"])


def build_critic(cfg, log=print) -> Critic:
    """The critic for `cfg` (a RunConfig): value head on `algo.critic.model` or the policy's model."""
    from transformers import AutoConfig, AutoModelForTokenClassification

    from reasonrl.models.loading import attention_kwargs, disable_dropout, resolve_device, resolve_model_path

    path = resolve_model_path(cfg.algo.critic.model or cfg.model.path, log=log)
    dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[cfg.model.dtype]
    # classifier_dropout=0: transformers' token-classification heads default to dropout 0.1, which
    # would make training-mode values differ from the values GAE used
    config = AutoConfig.from_pretrained(path, num_labels=1)
    config.classifier_dropout = 0.0
    # an OpenRLHF reward model's value head under its own name starts the value head, as OpenRLHF's critic
    prefix = getattr(config, "value_head_prefix", None)
    heads = {"key_mapping": {rf"^{re.escape(prefix)}\.": "score."}} if prefix and prefix != "score" else {}
    model = AutoModelForTokenClassification.from_pretrained(path, config=config, dtype=dtype,
                                                            **attention_kwargs(config), **heads)  # fmt: skip
    model.to(resolve_device(cfg.model.device))
    if cfg.model.disable_dropout:  # values in training mode = the values GAE used
        disable_dropout(model)
    if cfg.model.gradient_checkpointing:  # the critic is a whole second backbone: the same memory trade
        model.gradient_checkpointing_enable()
    t = cfg.train
    lr = cfg.algo.critic.lr if cfg.algo.critic.lr is not None else t.lr
    return Critic(model, lr=lr, betas=t.betas, weight_decay=t.weight_decay, grad_clip=t.grad_clip)
