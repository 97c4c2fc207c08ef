"""The output head outside the model's forward: what the logits-free log-probs (`model.logprob_chunk`,
also under packing) compute from the last hidden states, and the check that it is what the model's own
forward computes.

Owns: `decoder` (the module giving the last hidden states), `head_logprobs` (log-probs and entropy
of the targets, a chunk of positions at a time through the head, each chunk's logits recomputed in
backward), `head_logits` (the head plus what some models do to its output inside their forward:
Gemma 2/3's final logit soft-capping, Cohere's `logit_scale`, Granite's `logits_scaling`, Inkling's
width multiplier and padded vocabulary) and `check_output_head` (run once before training: the
model's own logits on a short probe against `head_logits` of its last hidden states; a model whose
forward changes the logits in any other way is refused, naming the setting, instead of training on
wrong log-probs). Does not own: which hidden states (`engines.single.last_hidden`,
`engines.packing`).
"""

from __future__ import annotations

import torch

from reasonrl.algorithms.logprobs import logprobs_and_entropy
from reasonrl.models.loading import unwrapped

PROBE_TOKENS = 8
TOLERANCE = 1e-3  # of the largest logit: the same ops on the same inputs differ by rounding only


def logit_transform(model) -> tuple[float, float, float | None, int | None]:
    """(divisor, scale, softcap, vocab): what the model's forward does around its head. logits =
    head(h / divisor) * scale, then softcap * tanh(logits / softcap) when softcap is set, then the first
    `vocab` logits when vocab is set (a head padded past the tokenizer's vocabulary)."""
    from reasonrl.models.loading import text_config

    cfg = text_config(model.config)
    scale = float(getattr(cfg, "logit_scale", None) or 1.0)  # Cohere, Cohere 2
    if getattr(cfg, "logits_scaling", None):  # Granite: logits / logits_scaling
        scale /= float(cfg.logits_scaling)
    cap = getattr(cfg, "final_logit_softcapping", None)  # Gemma 2, Gemma 3
    # Inkling: h / logits_mup_width_multiplier into the head, its output cut to unpadded_vocab_size
    divisor = float(getattr(cfg, "logits_mup_width_multiplier", None) or 1.0)
    vocab = getattr(cfg, "unpadded_vocab_size", None)
    return divisor, scale, (float(cap) if cap else None), (int(vocab) if vocab else None)


def decoder(model):
    """The module whose first output is the last hidden states (after the final norm: what the head
    reads): `get_decoder()`, or the causal LM's `model` where that returns a causal LM, whose first
    output is logits: Llama 4's text model returns itself in transformers 5.19 (its base-model prefix
    names a module it does not have), and Llama 4's multimodal model its language model, a causal LM."""
    found = model.get_decoder()
    inner = unwrapped(model)
    if found is model or found is inner:
        found = getattr(inner, "model", found)
    elif hasattr(found, "get_output_embeddings") and found.get_output_embeddings() is not None:
        found = getattr(found, "model", found)
    return found


def head_logits(head, hidden: torch.Tensor, divisor: float = 1.0, scale: float = 1.0, softcap: float | None = None,
                vocab: int | None = None) -> torch.Tensor:  # fmt: skip
    logits = head(hidden / divisor if divisor != 1.0 else hidden)
    if vocab is not None and vocab < logits.shape[-1]:
        logits = logits[..., :vocab]
    if scale != 1.0:
        logits = logits * scale
    if softcap is not None:
        logits = torch.tanh(logits / softcap) * softcap
    return logits


def _chunk_logprobs(
    head, hidden, targets, with_entropy: bool, entropy_grad: bool, temperature: float, *transform
):
    logits = head_logits(head, hidden, *transform)
    lp, ent = logprobs_and_entropy(logits, targets, with_entropy, entropy_grad, temperature)
    return (lp, ent) if with_entropy else (lp,)


def head_logprobs(
    model, hidden, targets, with_entropy: bool, autocast, chunk: int, entropy_grad: bool = True,
    temperature: float = 1.0,
):  # fmt: skip
    """(log-probs, entropy or None) of `targets` [..., N] from `hidden` [..., N, H] through the model's
    output head (and its logit transform, then / temperature), `chunk` positions at a time, each chunk's
    logits recomputed in backward."""
    from torch.utils.checkpoint import checkpoint, set_checkpoint_early_stop

    head, transform = model.get_output_embeddings(), logit_transform(model)
    lps, ents = [], []
    for s in range(0, targets.shape[-1], chunk):
        args = (head, hidden[..., s : s + chunk, :], targets[..., s : s + chunk], with_entropy, entropy_grad,
                temperature, *transform)  # fmt: skip
        # no early stop: the recomputation runs the whole chunk (a compiled log-prob function must
        # not be interrupted half-way by checkpoint's stop signal)
        with autocast(), set_checkpoint_early_stop(False):
            out = (
                checkpoint(_chunk_logprobs, *args, use_reentrant=False)
                if torch.is_grad_enabled()
                else _chunk_logprobs(*args)
            )
        lps.append(out[0])
        if with_entropy:
            ents.append(out[1])
    return torch.cat(lps, -1), (torch.cat(ents, -1) if with_entropy else None)


def check_output_head(model, setting: str = "model.logprob_chunk") -> None:
    """ConfigError unless `head_logits` of the model's last hidden states equals the model's own logits
    on a short probe (eval mode, no gradients; call it before the model is sharded or compiled)."""
    from reasonrl.config import ConfigError

    head = model.get_output_embeddings()
    ids = (torch.arange(PROBE_TOKENS) * 7919 % head.weight.shape[0]).unsqueeze(0)
    ids = ids.to(head.weight.device)
    was = model.training
    model.eval()
    try:
        with torch.no_grad():
            want = model(input_ids=ids, use_cache=False).logits.float()
            hidden = decoder(model)(input_ids=ids, use_cache=False)[0]
            got = head_logits(head, hidden, *logit_transform(model)).float()
    finally:
        model.train(was)
    if got.shape != want.shape:
        gap = f"logits of shape {tuple(want.shape)}, the head gives {tuple(got.shape)}"
    else:
        err = float((got - want).abs().max()) / max(float(want.abs().max()), 1e-6)
        if err <= TOLERANCE:
            return
        gap = f"logits differ from its head's output by {err:.3g} of the largest"
    raise ConfigError(f"{setting}: {type(model).__name__}'s forward changes its output head's logits in a way the "
                      f"log-probs from hidden states do not reproduce ({gap}); set {setting}=0")  # fmt: skip
