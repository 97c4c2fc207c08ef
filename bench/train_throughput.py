"""Training-step throughput of the single-device engine on this machine, side by side in one run:
1. our engine's policy update vs a bare forward / backward / AdamW of the same model on the same
   padded batch (ratio goal >= 0.9);
2. padded vs packed (`model.pack_tokens`) vs length-ordered micro-batches cut to their longest row
   (`model.remove_padding`) on the demo's real length distribution (addsub prompts and worked
   solutions through the demo tokenizer; a tiny demo-shaped model);
3. the largest tensor created by one forward / backward with and without chunked log-probs
   (`model.logprob_chunk`) for a 151,936-token vocabulary (Qwen2.5's), counted by a dispatch probe.

  .venv/bin/python bench/train_throughput.py [--rows 128] [--reps 5]
"""

from __future__ import annotations

import argparse
import functools
import json
import random
import time

import torch


def demo_batch(rows: int, seed: int = 0):
    """A TrainBatch shaped like a demo step: addsub prompts (left-padded) and solution completions
    (right-padded) of their real token lengths."""
    from reasonrl.data.prompts import encode_prompt
    from reasonrl.data.tasks import generate
    from reasonrl.models.tiny import TinySpec, build_model, build_tokenizer, corpus
    from reasonrl.types import TrainBatch

    problems = generate("addsub", rows, seed=seed, difficulty=2)
    spec = TinySpec(task="addsub")
    tok = build_tokenizer(corpus(problems), spec.vocab_size)
    model = build_model(spec, tok)
    prompts = [encode_prompt(tok, p) for p in problems]
    rng = random.Random(seed)
    comps = [
        tok(p.extra_info["solution"] + " " * rng.randint(0, 20))["input_ids"] + [tok.eos_token_id]
        for p in problems
    ]
    P, T = max(map(len, prompts)), max(map(len, comps))
    ids = torch.full((rows, P + T), tok.pad_token_id)
    attn = torch.zeros(rows, P + T, dtype=torch.long)
    for i, (pr, c) in enumerate(zip(prompts, comps)):
        ids[i, P - len(pr) : P], attn[i, P - len(pr) : P] = torch.tensor(pr), 1
        ids[i, P : P + len(c)], attn[i, P : P + len(c)] = torch.tensor(c), 1
    g = torch.Generator().manual_seed(seed)
    batch = TrainBatch(input_ids=ids, attention_mask=attn, mask=attn[:, P:].bool(), prompt_len=P,
                       advantages=torch.randn(rows, T, generator=g))  # fmt: skip
    return model, batch, int(attn.sum())


def time_engine(model, batch, forward, reps: int, micro: int, remove_padding: bool = False) -> float:
    from reasonrl.algorithms.masked import normalisers
    from reasonrl.config import AlgoConfig
    from reasonrl.engines.single import SingleDeviceEngine
    from reasonrl.trainer.step import make_loss_fn

    engine = SingleDeviceEngine(model, lr=1e-6, forward=forward)
    if remove_padding:  # what model.remove_padding does: the mini-batch longest first, micro-batches cut
        engine.trim_padding = True
        batch = batch.select(torch.argsort(batch.attention_mask.sum(-1), descending=True, stable=True))
    counts = normalisers(batch.mask)
    loss_fn = make_loss_fn(AlgoConfig(), counts["total_tokens"], counts["total_seqs"], batch.mask.shape[1])
    engine.train_step(batch, loss_fn, micro)  # warm-up
    t0 = time.perf_counter()
    for _ in range(reps):
        engine.train_step(batch, loss_fn, micro)
    return (time.perf_counter() - t0) / reps


def time_bare(model, batch, reps: int, micro: int) -> float:
    opt = torch.optim.AdamW(model.parameters(), lr=1e-6)

    def step():
        for s in range(0, batch.size, micro):
            ids, attn = batch.input_ids[s : s + micro], batch.attention_mask[s : s + micro]
            pos = (attn.cumsum(-1) - 1).clamp_min(0)
            logits = model(input_ids=ids, attention_mask=attn, position_ids=pos, use_cache=False).logits
            lp = torch.log_softmax(logits[:, batch.prompt_len - 1 : -1].float(), -1)
            tok = lp.gather(-1, ids[:, batch.prompt_len :].unsqueeze(-1)).squeeze(-1)
            (-(tok * batch.advantages[s : s + micro]) * batch.mask[s : s + micro]).sum().backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)

    step()
    t0 = time.perf_counter()
    for _ in range(reps):
        step()
    return (time.perf_counter() - t0) / reps


def largest_tensor(chunk: int) -> int:
    from torch.utils._python_dispatch import TorchDispatchMode
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from reasonrl.engines.single import completion_logprobs
    from reasonrl.types import TrainBatch

    class Probe(TorchDispatchMode):
        top = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            for t in out if isinstance(out, (tuple, list)) else [out]:
                if isinstance(t, torch.Tensor):
                    Probe.top = max(Probe.top, t.numel())
            return out

    torch.manual_seed(0)
    model = Qwen2ForCausalLM(Qwen2Config(vocab_size=151_936, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=512,
                                         tie_word_embeddings=False))  # fmt: skip
    ids = torch.randint(0, 151_936, (4, 264))
    batch = TrainBatch(input_ids=ids, attention_mask=torch.ones_like(ids), mask=torch.ones(4, 256, dtype=torch.bool),
                       prompt_len=8)  # fmt: skip
    Probe.top = 0
    with Probe():
        lp, ent = completion_logprobs(model, batch, with_entropy=True, chunk=chunk)
        (lp.sum() + ent.sum()).backward()
    return Probe.top


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=128)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--micro", type=int, default=64)
    ap.add_argument("--pack-tokens", type=int, default=1024)
    args = ap.parse_args()
    from reasonrl.engines.packing import packed_logprobs
    from reasonrl.engines.single import completion_logprobs

    model, batch, real = demo_batch(args.rows)
    padded_tokens = batch.input_ids.numel()
    t_bare = time_bare(model, batch, args.reps, args.micro)
    t_ours = time_engine(model, batch, completion_logprobs, args.reps, args.micro)
    t_pack = time_engine(
        model, batch, functools.partial(packed_logprobs, pack_tokens=args.pack_tokens), args.reps, args.micro
    )
    t_trim = time_engine(model, batch, completion_logprobs, args.reps, args.micro, remove_padding=True)
    big_plain, big_chunk = largest_tensor(0), largest_tensor(32)
    out = {
        "rows": args.rows, "real_tokens": real, "padded_tokens": padded_tokens,
        "bare_s": round(t_bare, 4), "ours_padded_s": round(t_ours, 4), "ours_packed_s": round(t_pack, 4),
        "ours_vs_bare_tokens_per_s_ratio": round(t_bare / t_ours, 3),
        "packed_speedup": round(t_ours / t_pack, 3), "ours_remove_padding_s": round(t_trim, 4),
        "remove_padding_speedup": round(t_ours / t_trim, 3),
        "tokens_per_s_padded": round(real / t_ours, 1), "tokens_per_s_packed": round(real / t_pack, 1),
        "largest_tensor_plain": big_plain, "largest_tensor_chunked32": big_chunk,
        "largest_tensor_ratio": round(big_plain / big_chunk, 1),
    }  # fmt: skip
    for k, v in out.items():
        print(f"{k}: {v}")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
