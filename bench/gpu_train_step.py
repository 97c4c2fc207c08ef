"""GPU figures of the single-device train engine: one GRPO/PPO-clip policy update in bf16 on a
random-initialised Qwen2-shaped model (no download), side by side with a bare PyTorch loop doing
the same forward/backward/AdamW on the same model and batch.

Prints seconds per optimizer step, tokens per second, and model FLOPs utilisation (6 * params *
tokens / peak bf16 FLOPs, attention FLOPs left out), then one JSON line. Needs CUDA; on CPU it says
so and exits 0. Uses only torch + transformers + reasonrl.engines / algorithms (no config stack), so
it runs on a bare GPU image.

    python bench/gpu_train_step.py --hidden 1024 --layers 16 --seq 1024 --batch 16 --micro 8
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import torch

PEAK_BF16_TFLOPS = {"H100": 989.0, "H200": 989.0, "A100": 312.0}  # dense bf16, SXM


def build_model(args):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    cfg = Qwen2Config(
        vocab_size=args.vocab, hidden_size=args.hidden, intermediate_size=args.hidden * 11 // 4,
        num_hidden_layers=args.layers, num_attention_heads=args.hidden // 64, num_key_value_heads=max(1, args.hidden // 256),
        max_position_embeddings=4 * args.seq, tie_word_embeddings=False,
    )  # fmt: skip
    torch.manual_seed(0)
    return Qwen2ForCausalLM(cfg).to(device="cuda", dtype=torch.bfloat16)


def make_batch(args):
    from reasonrl.types import TrainBatch

    g = torch.Generator().manual_seed(0)
    prompt = args.seq // 4
    ids = torch.randint(0, args.vocab, (args.batch, args.seq), generator=g)
    attn = torch.ones_like(ids)
    mask = torch.ones(args.batch, args.seq - prompt, dtype=torch.bool)
    adv = torch.randn(args.batch, 1, generator=g).expand(-1, args.seq - prompt).contiguous()
    return TrainBatch(ids, attn, mask, prompt, advantages=adv)


def ours(model, batch, args) -> float:
    from reasonrl.algorithms.losses import ppo_clip
    from reasonrl.algorithms.masked import aggregate
    from reasonrl.engines.single import SingleDeviceEngine

    engine = SingleDeviceEngine(model, lr=1e-6, bf16=True)
    total = batch.mask.sum()

    def loss_fn(micro, logprobs, entropy):
        tok, metrics = ppo_clip(
            logprobs, logprobs.detach(), micro.advantages.to(logprobs.device), micro.mask.to(logprobs.device)
        )
        return aggregate(tok, micro.mask.to(logprobs.device), "token_mean", total_tokens=total), metrics

    return _time(lambda: engine.train_step(batch, loss_fn, args.micro, with_entropy=False), args.steps)


def bare(model, batch, args) -> float:
    """The same update written directly: forward, token log-probs, policy-gradient loss, AdamW."""
    opt = torch.optim.AdamW(model.parameters(), lr=1e-6)
    ids, p = batch.input_ids.cuda(), batch.prompt_len
    adv = batch.advantages.cuda()
    total = batch.mask.sum().cuda()

    def step():
        for s in range(0, ids.shape[0], args.micro):
            x = ids[s : s + args.micro]
            with torch.autocast("cuda", dtype=torch.bfloat16):
                logits = model(input_ids=x, use_cache=False).logits[:, p - 1 : -1]
            lp = torch.log_softmax(logits.float(), -1).gather(-1, x[:, p:, None]).squeeze(-1)
            loss = -(torch.exp(lp - lp.detach()) * adv[s : s + args.micro]).sum() / total
            loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)

    return _time(step, args.steps)


def _time(fn, steps: int) -> float:
    fn()  # warm-up (allocator, kernels)
    torch.cuda.synchronize()
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2]


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--layers", type=int, default=16)
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--micro", type=int, default=8)
    ap.add_argument("--steps", type=int, default=5)
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("no CUDA device: nothing to measure")
        return {}
    name = torch.cuda.get_device_name()
    peak = next((v for k, v in PEAK_BF16_TFLOPS.items() if k in name), None)
    model = build_model(args)
    params = sum(p.numel() for p in model.parameters())
    batch = make_batch(args)
    tokens = args.batch * args.seq
    out = {"bench": "gpu_train_step", "device": name, "params": params, "tokens_per_step": tokens,
           "torch": torch.__version__}  # fmt: skip
    for label, fn in (("reasonrl", ours), ("bare_pytorch", bare)):
        sec = fn(model, batch, args)
        tps = tokens / sec
        mfu = 6 * params * tps / (peak * 1e12) if peak else None
        out[label] = {"sec_per_step": round(sec, 4), "tokens_per_s": round(tps), "mfu": mfu and round(mfu, 3)}
        print(
            f"{label:>13}: {sec:.3f} s/step  {tps:,.0f} tokens/s  MFU {mfu:.1%}"
            if mfu
            else f"{label}: {sec:.3f} s"
        )
    out["reasonrl_vs_bare"] = round(out["bare_pytorch"]["sec_per_step"] / out["reasonrl"]["sec_per_step"], 3)
    out["peak_memory_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 2)
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    main()
    sys.exit(0)
