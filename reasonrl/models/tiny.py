"""The tiny demo model, built offline: BPE tokenizer on the task corpus, a small Qwen2 from a config,
and a short supervised warm start on solved procedural problems so RL starts from a non-random policy.

Owns: `build_tokenizer`, `build_model`, `warm_start`, and `ensure_demo_model` (build once, save as a
normal Hugging Face directory - safetensors + tokenizer + chat template - in a cache dir, reuse later).
Does not own: loading arbitrary HF models (`models.loading`) or RL training.
"""

from __future__ import annotations

import fcntl
import json
import os
import random
import shutil
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from reasonrl.types import Problem

SPECIAL = ["<|pad|>", "<|endoftext|>", "<|user|>", "<|assistant|>", "<|system|>"]
CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


@dataclass
class TinySpec:
    """Everything that determines the demo model; its hash names the cache directory."""

    task: str = "arithmetic"
    difficulty: int = 2
    vocab_size: int = 96
    hidden_size: int = 128
    layers: int = 4
    heads: int = 4
    intermediate_size: int = 384
    max_positions: int = 128
    sft_examples: int = 20000
    sft_batch: int = 64
    sft_lr: float = 2e-3
    sft_max_steps: int = 600
    sft_target_accuracy: float = 0.25  # stop the warm start once held-out greedy accuracy reaches this
    sft_check_every: int = 25
    seed: int = 1234

    def key(self) -> str:
        import hashlib

        return hashlib.sha1(json.dumps(asdict(self), sort_keys=True).encode()).hexdigest()[:12]


def corpus(problems: list[Problem]) -> list[str]:
    return [p.user_text + " " + p.extra_info["solution"] for p in problems]


def build_tokenizer(texts: list[str], vocab_size: int):
    """A byte-free BPE over the task alphabet with single-digit tokens, wrapped as a HF fast tokenizer."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token=None, fuse_unk=False))
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.Punctuation("isolated")]
    )
    tok.decoder = decoders.Fuse()
    alphabet = sorted(set("".join(texts)) | set("0123456789+-*/()=<>, .:"))
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=SPECIAL, initial_alphabet=alphabet, show_progress=False
    )
    tok.train_from_iterator(texts, trainer)
    hf = PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="<|pad|>", eos_token="<|endoftext|>", bos_token=None
    )
    hf.chat_template = CHAT_TEMPLATE
    hf.padding_side = "left"
    return hf


def qwen2_config(
    spec: TinySpec, vocab_size: int | None = None, pad_id: int | None = None, eos_id: int | None = None
):
    """The demo model's architecture (vocab_size: the tokenizer's actual size; default the spec's)."""
    from transformers import Qwen2Config

    return Qwen2Config(
        vocab_size=vocab_size or spec.vocab_size,
        hidden_size=spec.hidden_size,
        num_hidden_layers=spec.layers,
        num_attention_heads=spec.heads,
        num_key_value_heads=spec.heads,
        intermediate_size=spec.intermediate_size,
        max_position_embeddings=spec.max_positions,
        tie_word_embeddings=True,
        pad_token_id=pad_id,
        eos_token_id=eos_id,
        bos_token_id=eos_id,
    )


def build_model(spec: TinySpec, tokenizer):
    import torch
    from transformers import Qwen2ForCausalLM

    torch.manual_seed(spec.seed)
    cfg = qwen2_config(spec, len(tokenizer), tokenizer.pad_token_id, tokenizer.eos_token_id)
    return Qwen2ForCausalLM(cfg)


def sft_batch(tokenizer, problems: list[Problem]):
    """Right-padded input_ids / attention_mask / labels (-100 outside the solution + EOS)."""
    import torch

    from reasonrl.data.prompts import encode_prompt

    rows, labels = [], []
    for p in problems:
        prompt = encode_prompt(tokenizer, p)
        answer = tokenizer(p.extra_info["solution"], add_special_tokens=False)["input_ids"]
        answer = answer + [tokenizer.eos_token_id]
        rows.append(prompt + answer)
        labels.append([-100] * len(prompt) + answer)
    width = max(map(len, rows))
    ids = torch.full((len(rows), width), tokenizer.pad_token_id, dtype=torch.long)
    lab = torch.full((len(rows), width), -100, dtype=torch.long)
    attn = torch.zeros((len(rows), width), dtype=torch.long)
    for i, (r, lb) in enumerate(zip(rows, labels)):
        ids[i, : len(r)] = torch.tensor(r)
        lab[i, : len(lb)] = torch.tensor(lb)
        attn[i, : len(r)] = 1
    return ids, attn, lab


def warm_start(model, tokenizer, spec: TinySpec, train: list[Problem], val: list[Problem], log=print) -> dict:
    """Supervised warm start until held-out greedy accuracy reaches `spec.sft_target_accuracy`."""
    import torch

    from reasonrl.eval.accuracy import evaluate
    from reasonrl.rollout.base import SamplingParams
    from reasonrl.rollout.factory import build_rollout_engine

    rng = random.Random(spec.seed)
    opt = torch.optim.AdamW(model.parameters(), lr=spec.sft_lr, weight_decay=0.0)
    engine = build_rollout_engine("hf", model, tokenizer)
    greedy = SamplingParams.greedy(40)
    acc, step = 0.0, 0
    model.train()
    for step in range(1, spec.sft_max_steps + 1):
        ids, attn, lab = sft_batch(tokenizer, rng.sample(train, spec.sft_batch))
        loss = model(input_ids=ids, attention_mask=attn, labels=lab).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        if step % spec.sft_check_every == 0:
            acc = evaluate(engine, tokenizer, val, greedy).accuracy
            log(f"warm start step {step}: loss {loss.item():.3f} held-out greedy accuracy {acc:.3f}")
            if acc >= spec.sft_target_accuracy:
                break
    model.eval()
    return {"sft_steps": step, "sft_accuracy": acc}


def ensure_demo_model(spec: TinySpec, root: Path, log=print) -> Path:
    """Path of the cached demo model for `spec`, building it (tokenizer, model, warm start) if absent.
    Built in a temporary directory and renamed into place, so an interrupted build leaves nothing; one
    process builds at a time (a lock file beside it): the others wait and reuse its model."""
    target = Path(root) / f"demo-{spec.task}-{spec.key()}"
    if (target / "config.json").is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / f".{target.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, or when its process dies
        if not (target / "config.json").is_file():
            _build_demo_model(spec, target, log)
    return target


def _build_demo_model(spec: TinySpec, target: Path, log) -> None:
    import torch

    from reasonrl.data.tasks import generate

    log(f"building the tiny demo model in {target} (once; later runs reuse it)")
    torch.manual_seed(spec.seed)
    train = generate(spec.task, spec.sft_examples, seed=spec.seed, difficulty=spec.difficulty, split="train")
    val = generate(spec.task, 200, seed=spec.seed + 1, difficulty=spec.difficulty, split="test")
    tokenizer = build_tokenizer(corpus(train), spec.vocab_size)
    model = build_model(spec, tokenizer)
    stats = warm_start(model, tokenizer, spec, train, val, log=log)
    tmp = Path(tempfile.mkdtemp(prefix=".demo-", dir=target.parent))
    try:
        model.save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)
        (tmp / "reasonrl_demo.json").write_text(json.dumps({"spec": asdict(spec), **stats}, indent=1))
        os.replace(tmp, target)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
