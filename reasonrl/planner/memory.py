"""Estimated peak memory per device of a training run, from the model's shape and the run's settings.

Owns: the arithmetic, one term per thing that holds memory, each with the formula in a comment:
weights, gradients and AdamW state (sharded over ranks by FSDP2, or offloaded to CPU), the frozen
reference model (KL), a critic (GAE), a reward model's weights (loaded for the whole run), activations
of one micro-batch with and without activation checkpointing, the logits [B, T, V] and their
log-softmax, and the generation phase's KV cache.
The training and generation phases do not overlap, so the peak is the larger of the two.
Checked against measured peaks (torch's MemTracker) in tests/e2e/test_planner_memory.py.
Does not own: reading the model's shape (`planner.shape`) or judging the numbers (`planner.checks`).
"""

from __future__ import annotations

from dataclasses import dataclass

from reasonrl.models.loading import torch_dtype
from reasonrl.planner.shape import ModelShape


@dataclass
class Settings:
    dtype: str = "float32"
    micro_batch: int = 1  # sequences per forward / backward on one device
    seq_tokens: int = 1  # prompt + completion tokens of the longest row (padding makes every row this long)
    completion_tokens: int = 1
    gradient_checkpointing: bool = False
    logprob_chunk: int = 0  # completion positions per logits chunk (0: all at once)
    pack_tokens: int = 0  # token budget of a packed micro-batch (0: padded micro-batches)
    padded: bool = True  # rows of different lengths: a padding mask reaches attention (see below)
    world: int = 1
    sharded: bool = False  # FSDP2
    cpu_offload: bool = False
    reference: bool = False  # a frozen reference model for the KL term
    critic: bool = False  # a value model of the same size (GAE)
    generation_rows: int = 1  # sequences one HF generate call decodes together on this device
    engine_memory_share: float = (
        0.0  # > 0: a colocated rollout engine (vLLM) holds this fraction of device memory
    )
    reward_model_bytes: float = 0.0  # a reward model's weights on this device (reward.weights' reward_model)


def _per_token_layer_floats(m: ModelShape, attn_len: int, flash: bool, masked: bool = True,
                            low_precision: bool = False) -> float:  # fmt: skip
    """Values (of the model's dtype) one decoder layer keeps per token for backward: the two norms'
    inputs and outputs (4h), q / k / v and the rotated q / k (h + 3 kv), the attention output twice
    (SDPA's own for its backward, and the transposed copy o_proj reads: 2h), the MLP's gate, up,
    act(gate) and product (4I). With a padding mask (RL batches always have one) transformers repeats
    k and v to every query head before SDPA (GQA's kv = heads x head_dim) and one more h is kept. In a
    16-bit dtype the RMSNorms' fp32 upcast keeps one more fp32 h (2h of 16 bits). Without fused
    attention also the softmax probabilities (heads T).
    Measured with planner.measure (live tensors, the difference between 8 and 16 rows at 2 and 4
    layers; hidden 256, MLP 1024, 8 heads): fp32 without a mask 6282 (2 kv heads; CPU's SDPA expands
    them itself) and 6666 (8) values against 6080 / 6656 here; with a mask 6922 (both) against 6912;
    bf16 adds 522 (512 here)."""
    kv = (m.heads if masked else m.kv_heads) * m.head_dim
    norms = m.norms_per_layer
    floats = (3 + 2 * norms) * m.hidden + 3 * kv + 4 * m.intermediate + (m.hidden if masked else 0)
    floats += norms * m.hidden if low_precision else 0
    if flash:
        return floats
    # eager attention keeps the softmax output (computed in fp32: in a 16-bit dtype that is two values,
    # plus the 16-bit copy the value product reads) and, with soft-capping, the tanh output
    probs = (3 if low_precision else 1) + (1 if m.attn_softcap else 0)
    return floats + probs * m.heads * attn_len


def estimate(m: ModelShape, s: Settings) -> dict[str, float]:
    """Bytes per device for each term, plus `training_peak`, `generation_peak` and `peak`."""
    b = torch_dtype(s.dtype).itemsize
    shard = s.world if s.sharded else 1
    resident = 0.0 if s.cpu_offload else 1.0  # offloaded state lives in CPU memory
    out: dict[str, float] = {}
    # FSDP2 keeps 1/world of every parameter, and unshards one layer (plus the prefetched next) at a time
    out["weights"] = m.params * b / shard * resident + (2 * m.largest_layer * b if s.sharded else 0)
    out["gradients"] = m.trainable * b / shard * resident
    out["optimizer"] = 2 * m.trainable * b / shard * resident  # AdamW: exp_avg and exp_avg_sq, in param dtype
    out["reference"] = m.params * b / shard * resident if s.reference else 0.0
    out["critic"] = 4 * m.params * b / shard * resident if s.critic else 0.0  # its weights, grads, AdamW
    out["reward_model"] = s.reward_model_bytes  # whole on every rank: each scores its own rows
    tokens = s.micro_batch * s.seq_tokens  # every row's activations stay in the graph until backward
    # SDPA (transformers' default, on CPU and CUDA alike) keeps no [heads, T, T] probabilities for padded
    # rows (measured on CPU: counting them over-estimated the demo by 10-20%); packs attend per sequence
    # (engines.packing.segment_attention: fused SDPA on slices, no mask), so no padding mask reaches it
    # eager attention: a padded batch through the model's own eager function; a pack through segment
    # attention, which keeps no probabilities (SDPA; soft-capping in blocks, models.softcap)
    # attention of the model's own: eager, and a pack's probabilities span the whole pack
    own_pack = bool(s.pack_tokens and m.own_attention)
    flash = not m.eager_attention or bool(s.pack_tokens and not own_pack)
    attn_len = max(s.pack_tokens, s.seq_tokens) if own_pack else s.seq_tokens
    per_token = _per_token_layer_floats(m, attn_len, flash, s.padded and not s.pack_tokens, b < 4) * b
    layer = per_token * tokens
    # packs run one forward each (whole rows, first fit): a checkpointed layer is recomputed one pack at a
    # time in backward, and one pack's [P, V] head output exists at a time
    pack = min(max(1, s.pack_tokens // s.seq_tokens) * s.seq_tokens, tokens) if s.pack_tokens else tokens
    edges = 3 * m.hidden * tokens * b  # embedding output, final norm input and output
    out["activations_no_checkpointing"] = m.layers * layer + edges
    # each layer's input is kept; one layer's activations (of one pack) exist at a time
    out["activations_checkpointing"] = m.layers * m.hidden * tokens * b + per_token * pack + edges
    out["activations"] = out[
        "activations_checkpointing" if s.gradient_checkpointing else "activations_no_checkpointing"
    ]
    # logits: the head's output [B, T, V] in the model dtype and, in backward, its gradient; the fp32
    # log-softmax over the completion positions (kept for backward) and its gradient; an fp32 copy
    # first when the model computes in 16 bits. With logprob_chunk only one chunk's worth at a time.
    rows = tokens / max(s.seq_tokens, 1)
    comp = min(s.logprob_chunk, s.completion_tokens) if s.logprob_chunk else s.completion_tokens
    head_positions = comp if s.logprob_chunk else s.seq_tokens
    # in 16 bits the upcast's backward also holds the 16-bit gradient of the completion positions
    # while the slice's backward builds the full one (measured: the 32k-vocabulary bf16 case was 11% low)
    low = b != 4
    kept_logits = 0.0  # what of them lives through the layers' backward
    if s.pack_tokens and s.logprob_chunk:  # one chunk of a pack's completion positions at a time
        out["logits"] = m.vocab * s.logprob_chunk * (2 * b + (2 + low) * 4 + low * b)
    elif s.pack_tokens:  # kept for backward: every row's fp32 log-softmax (and upcast); the rest one pack's
        pack_rows = pack / max(s.seq_tokens, 1)
        kept_logits = m.vocab * rows * comp * 4 * (1 + low)
        out["logits"] = kept_logits + m.vocab * (pack_rows * comp * (4 * (1 + low) + low * b) + 2 * pack * b)
    else:
        out["logits"] = (
            rows * m.vocab * (2 * head_positions * b + (2 + (b != 4)) * comp * 4 + (b != 4) * comp * b)
        )
    # soft-capped attention in blocks (models.softcap): one block of scores at a time in one layer's
    # backward, as tanh, probabilities and their gradient in fp32 (in 16 bits also the 16-bit copies the
    # products read); the padded batch's rows, or one pack, per call. Not at once with the logits but
    # what packs keep of them: the head's backward has freed the rest when the layers' begins
    out["attention_blocks"] = 0.0
    if m.attention == "reasonrl_softcap":
        from reasonrl.models.softcap import BLOCK_ELEMENTS

        block = min(BLOCK_ELEMENTS, m.heads * (pack if s.pack_tokens else tokens) * s.seq_tokens)
        out["attention_blocks"] = block * (3 * 4 + 2 * low * b)
    if s.critic:  # its activations (no vocabulary head)
        out["critic"] += out["activations"]
    # generation: keys and values of every layer for every row and position, and one step's logits
    # (an engine with its own memory reservation, vLLM, keeps its KV cache inside that share instead)
    own = 0.0 if s.engine_memory_share else 1.0
    kv_layers = m.layers if m.kv_layers is None else m.kv_layers  # a hybrid's attention layers only
    width = kv_layers * m.kv_heads * m.head_dim if m.kv_width is None else m.kv_width  # per token, k or v
    out["kv_cache"] = own * s.generation_rows * s.seq_tokens * 2 * width * b
    out["generation_logits"] = own * s.generation_rows * m.vocab * 4 * 2
    persistent = (out["weights"] + out["optimizer"] + out["reference"] + out["reward_model"]
                  + (3 * m.params * b / shard if s.critic else 0))  # fmt: skip
    out["training_peak"] = (out["weights"] + out["gradients"] + out["optimizer"] + out["reference"] + out["reward_model"]
                            + out["critic"] + out["activations"] + kept_logits
                            + max(out["logits"] - kept_logits, out["attention_blocks"]))  # fmt: skip
    out["generation_peak"] = persistent + out["kv_cache"] + out["generation_logits"]
    out["peak"] = max(out["training_peak"], out["generation_peak"])
    return out
