"""Whether a model keeps apart what batching and packing put side by side, checked on the model itself
(its weights, dtype, device and kernels) before any work.

Owns: `dependence` (how much some positions' outputs depend on other positions' inputs, relative to how
much they depend on their own) and `check_padding` (a left-padded row's outputs must not depend on its
padding: generation and the padded training forward pad every row on the left; DeepSeek-V4's
compressed attention is refused by its config, `compressed_layers`). Does not own: the
packed forward or its check (`engines.packing.check_packing`, which asks `dependence` whether a pack's
sequences stay apart).

Measured by gradient, not by comparing outputs: with a scalar s, a fixed random projection of the
outputs at positions D, it compares |ds/de| over the input embeddings e of positions S with |ds/de|
over those of D. A model that keeps S apart from D (masked attention gives S probability 0, every
other layer works token by token) has no path from S to D, and the gradient is exactly 0, in any
dtype. A model that carries state along the sequence past the attention mask (a convolution, a
recurrence, linear attention) has one, and how much it passes on depends on the weights: on tiny
random models (`tests/unit/test_architectures.py`, fp32 and bf16) exactly 0 for all 83 attention
families that pack and for the padding of 6 more (attention of their own) and of 20 hybrid and
state-space ones, and from 8.5e-5 (LFM2's convolution at its default init) to 16 where positions
mix. So any dependence counts (`LEAK`, a hair above 0): comparing log-probs would need a tolerance
wider than bf16 rounding, under which such leaks stay. What the gradient cannot see: a path that
reads token ids rather than embeddings (Qwen4-Exp's hashed n-gram embeddings of the preceding ids;
transformers gives its pad positions the EOS id, so a padded row and the same row alone agree, as a
test checks). So a left-padded row's logits are also compared with the row's alone (`padding_gap`,
on average within `tolerance` of their spread): the check that remains for a model with no input
embedding layer, and the one that sees a path reading token ids.
"""

from __future__ import annotations

from contextlib import contextmanager

import torch

from reasonrl.errors import InputError


class NonFiniteGradient(FloatingPointError):
    """`dependence` met NaN / inf in the backward: what it measures is undefined, and training through
    the same forward would get such gradients too."""


class PadGradientNotFinite(InputError):
    """`check_padding`: the backward of a row left-padded with this pad id is not finite (another pad
    token may do: `models.loading.load_policy` tries the EOS token)."""


@contextmanager
def evaluating(model):
    """Within: `model` in eval mode (no dropout); its mode as it was afterwards."""
    was = model.training
    model.eval()
    try:
        yield model
    finally:
        model.train(was)


LEAK = 1e-9  # dependence above which positions count as mixed: any (where they are apart it is exactly 0)


def dependence(model, inputs: dict, src: list[tuple[int, int]], dst: list[tuple[int, int]]) -> float:
    """|d s / d e[src]| / |d s / d e[dst]| for one forward of `model(**inputs)`: `src` and `dst` are
    (row, position) pairs, e the input embeddings (as the embedding layer returns them), s a random
    projection (seed 0) of the logits at `dst`. Eval mode, no parameter gradients."""
    captured = []

    def leaf(module, args, out):  # the embeddings become the leaf the gradient is taken against
        captured.append(out.detach().requires_grad_())
        return captured[-1]

    handle = model.get_input_embeddings().register_forward_hook(leaf)
    try:
        with evaluating(model), torch.enable_grad():
            logits = model(**inputs, use_cache=False).logits
            rows, cols = (torch.tensor(x, device=logits.device) for x in zip(*dst))
            picked = logits[rows, cols].float()
            r = torch.randn(picked.shape, generator=torch.Generator().manual_seed(0)).to(picked.device)
            (grad,) = torch.autograd.grad((picked * r).sum(), captured[0])
    finally:
        handle.remove()
    if not torch.isfinite(grad).all():
        raise NonFiniteGradient(f"the gradient is not finite in {next(model.parameters()).dtype}")
    grad = grad.float().norm(dim=-1)  # [rows, positions]
    on = lambda pairs: grad[tuple(torch.tensor(x, device=grad.device) for x in zip(*pairs))].norm()  # noqa: E731
    own = on(dst)
    return float(on(src) / own) if own > 0 else float("inf")


def compressed_layers(config) -> list[str]:
    """The layer types of `config` that compress keys and values in blocks along the whole input
    (DeepSeek-V4's compressed sparse and heavily compressed attention), sorted."""
    from reasonrl.models.loading import text_config

    return sorted(
        {t for t in getattr(text_config(config), "layer_types", None) or () if "compressed" in str(t)}
    )


def check_padding(model, pad_id: int | None = 0, log=print) -> None:
    """InputError unless a left-padded row's outputs are independent of its padding:
    an architecture whose state runs through pad positions regardless of the attention mask (RWKV and
    RecurrentGemma in transformers) would generate and train on log-probs that change with the batch's
    longest prompt."""
    kind = getattr(model.config, "model_type", type(model).__name__)
    blocks = compressed_layers(model.config)
    if blocks:  # past its sliding window (128 tokens): a probe this short would not reach them
        raise InputError(
            f"model {kind!r}: its {', '.join(blocks)} layers compress keys and values in blocks counted from "
            "the start of the input, pad positions included, so a left-padded row's outputs depend on its "
            "padding and batched generation and training would get wrong log-probs; reasonrl cannot use this model"
        )
    try:
        _ = model.get_input_embeddings().weight  # what `dependence` takes the gradient against
    except (AttributeError, NotImplementedError):
        log(f"{type(model).__name__}: no input embedding layer; left padding checked by its outputs only")
    else:
        inputs = _padded_row(model, pad_id)
        try:
            leak = dependence(
                model, inputs, src=[(0, j) for j in range(3)], dst=[(0, j) for j in range(3, 8)]
            )
        except NonFiniteGradient as e:  # Gemma 3n with a zero pad embedding: mean(h ** 2) ** 0.5 of h = 0
            raise PadGradientNotFinite(
                f"model {kind!r}: the backward of a row left-padded with pad id {pad_id} is not finite ({e}; "
                "e.g. a norm without epsilon taken of a pad position whose embedding is zero), so training on "
                "left-padded batches would get NaN gradients; give its tokenizer a pad_token whose embedding "
                "is not zero (e.g. its EOS token)"
            ) from None
        if leak > LEAK:
            raise InputError(
                f"model {kind!r}: a left-padded row's outputs depend on its padding (dependence {leak:.2g}: "
                "the architecture carries state through pad positions past the attention mask), so batched "
                "generation and training would get wrong log-probs; reasonrl cannot use this model"
            )
    # and by the outputs: a path that reads the token ids themselves, which no gradient shows
    gap = padding_gap(model, pad_id)
    if gap > tolerance(model):
        raise InputError(
            f"model {kind!r}: a left-padded row's logits differ from the row's alone by {gap:.2g} of their "
            "spread on average (through a path the gradient check cannot see, e.g. one that reads the pad "
            "token ids), so batched generation and training would get wrong log-probs; reasonrl cannot use "
            "this model"
        )


def tolerance(model) -> float:
    """How far apart, relative to their spread, two computations of the same logits may be: 1e-3 in fp32,
    5e-2 in lower precision (where the same sum in another order rounds differently)."""
    return 1e-3 if next(model.parameters()).dtype == torch.float32 else 5e-2


def relative_gap(a: torch.Tensor, b: torch.Tensor) -> float:
    """mean |a - b| over the spread (standard deviation) of b: what a wrong computation moves everywhere
    (positions counted along a pack, state through padding), and rounding in 16 bits only here and
    there (the largest of a million differences would need a wider tolerance)."""
    a, b = a.float(), b.float()
    return ((a - b).abs().mean() / b.std().clamp_min(1e-6)).item()


def _padded_row(model, pad_id: int | None) -> dict:
    """The inputs of five real tokens left-padded with three of `pad_id` (what the batch pads with; 0
    where it is none or out of the vocabulary): ids [1, 8], attention mask, position ids."""
    from reasonrl.models.loading import text_config

    vocab = text_config(model.config).vocab_size
    pad_id = pad_id if pad_id is not None and 0 <= pad_id < vocab else 0
    real = [(pad_id + 1 + k) % vocab for k in range(5)]
    device = next(model.parameters()).device
    ids = torch.tensor([[pad_id] * 3 + real], device=device)
    attn = (torch.arange(ids.shape[1], device=device) >= 3).long()[None]
    return dict(input_ids=ids, attention_mask=attn, position_ids=(attn.cumsum(-1) - 1).clamp_min(0))


@torch.no_grad()
def padding_gap(model, pad_id: int | None) -> float:
    """`relative_gap` between a left-padded row's logits (eval mode) and those of the row alone."""
    inputs = _padded_row(model, pad_id)
    with evaluating(model):
        padded = model(**inputs, use_cache=False).logits[0, 3:]
        alone = model(input_ids=inputs["input_ids"][:, 3:], use_cache=False).logits[0]
    return relative_gap(padded, alone)
