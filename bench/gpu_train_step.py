"""GPU figures of the train engines: one GRPO/PPO-clip policy update in bf16 on a random-initialised
Qwen2-shaped model (a published Qwen2.5 config or a custom shape; no download), over a grid of
sequence lengths and activation-checkpointing settings, through the single-device engine or the FSDP2
engine (world size 1, NCCL, started in-process), optionally side by side with a bare PyTorch loop doing
the same forward / backward / AdamW on the same model and batch.

Every configuration trains the same number of tokens per optimizer step (--tokens-per-step) in
micro-batches of --tokens-per-micro tokens; a quarter of each row is prompt, the rest completion.
Prints seconds per step, tokens per second, model FLOPs utilisation and peak memory per row, then one
JSON line. MFU counts 6 x (decoder + output-head parameters) per token, plus causal attention
(6 x layers x seq x hidden) in `mfu_attn`, against the GPU's dense bf16 peak (989 TFLOPs on H100).
Needs CUDA; without it, it says so and exits 0. `--device cpu` runs the same code path on the CPU in
fp32 (no MFU, no peak memory), a smoke test the test suite runs with a tiny shape so the script works
when a GPU session comes. Uses only torch + transformers + reasonrl.engines / algorithms (no config
stack), so it runs on a bare GPU image.

    python bench/gpu_train_step.py --preset qwen2.5-0.5b --seqs 2048,4096,8192 --ckpt off,on --chunk 256
    python bench/gpu_train_step.py --preset qwen2.5-1.5b --engine fsdp2 --seqs 4096 --ckpt on --chunk 256
    python bench/gpu_train_step.py --preset qwen2.5-0.5b --seqs 4096 --chunk 256 --pack 16384

`--pack N` gives the rows uneven completions (uniform from 1/8 of the completion budget to all of it,
right-padded, as RL batches are) and times our update padded and packed (`model.pack_tokens=N`) on
the same batch; tokens/s and MFU then count real tokens only.
"""

from __future__ import annotations

import argparse
import functools
import gc
import json
import os
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from model_shapes import peak_tflops, qwen2_config, train_flops_per_token  # noqa: E402


def cuda(device: str) -> bool:
    return device.startswith("cuda")


def build_model(args):
    from transformers import AutoModelForCausalLM

    cfg = qwen2_config(args.preset, args.hidden, args.layers, args.vocab, context=max(args.seq_list) * 2)
    torch.manual_seed(0)
    dtype = torch.bfloat16 if cuda(args.device) else torch.float32
    with torch.device(args.device):
        model = AutoModelForCausalLM.from_config(cfg, dtype=dtype, attn_implementation=args.attn)
    return model


def make_batch(vocab: int, rows: int, seq: int, uneven: bool = False):
    from reasonrl.types import TrainBatch

    g = torch.Generator().manual_seed(0)
    prompt = seq // 4
    ids = torch.randint(0, vocab, (rows, seq), generator=g)
    attn = torch.ones_like(ids)
    if uneven:  # completions of 1/8 to all of the budget, right-padded
        budget = seq - prompt
        for i, n in enumerate(torch.randint(max(1, budget // 8), budget + 1, (rows,), generator=g).tolist()):
            attn[i, prompt + n :] = 0
            ids[i, prompt + n :] = 0
    mask = attn[:, prompt:].bool()
    adv = torch.randn(rows, 1, generator=g).expand(-1, seq - prompt).contiguous()
    return TrainBatch(ids, attn, mask, prompt, advantages=adv)


def make_engine(model, kind: str, device: str):
    bf16 = cuda(device)
    if kind == "fsdp2":
        from reasonrl.distributed import init_from_env
        from reasonrl.engines.fsdp2 import FSDP2Engine

        # a one-rank launch as torchrun describes it, joined the way the trainer joins it (with CUDA:
        # NCCL for CUDA tensors and gloo for the CPU ones the engine agrees on)
        for k, v in (("MASTER_ADDR", "127.0.0.1"), ("MASTER_PORT", "29561"), ("RANK", "0"),
                     ("LOCAL_RANK", "0"), ("WORLD_SIZE", "1")):  # fmt: skip
            os.environ.setdefault(k, v)
        init_from_env(single_rank=True)
        return FSDP2Engine(model, lr=1e-6, bf16=bf16)
    from reasonrl.engines.single import SingleDeviceEngine

    return SingleDeviceEngine(model, lr=1e-6, bf16=bf16)


def ours_step(engine, batch, micro: int, chunk: int, entropy: bool = True, pack: int = 0):
    from reasonrl.algorithms.losses import ppo_clip
    from reasonrl.algorithms.masked import aggregate
    from reasonrl.engines.packing import packed_logprobs
    from reasonrl.engines.single import completion_logprobs

    engine.forward = (
        functools.partial(packed_logprobs, pack_tokens=pack, chunk=chunk)
        if pack
        else functools.partial(completion_logprobs, chunk=chunk)
    )
    total = batch.mask.sum()

    def loss_fn(m, logprobs, entropy):
        dev = logprobs.device
        tok, metrics = ppo_clip(logprobs, logprobs.detach(), m.advantages.to(dev), m.mask.to(dev))
        return aggregate(tok, m.mask.to(dev), "token_mean", total_tokens=total), metrics

    return lambda: engine.train_step(batch, loss_fn, micro, with_entropy=entropy, entropy_grad=False)


def bare_step(model, opt, batch, micro: int, device: str):
    """The same update written directly: forward, token log-probs, policy-gradient loss, AdamW."""
    ids, p = batch.input_ids.to(device), batch.prompt_len
    adv = batch.advantages.to(device)
    total = batch.mask.sum().to(device)

    def step():
        for s in range(0, ids.shape[0], micro):
            x = ids[s : s + micro]
            with torch.autocast(torch.device(device).type, dtype=torch.bfloat16, enabled=cuda(device)):
                logits = model(input_ids=x, use_cache=False).logits[:, p - 1 : -1]
            lp = torch.log_softmax(logits.float(), -1).gather(-1, x[:, p:, None]).squeeze(-1)
            loss = -(torch.exp(lp - lp.detach()) * adv[s : s + micro]).sum() / total
            loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step


def fused_check(vocab: int, tokens: int = 16384) -> dict:
    """The compiled log-prob / entropy path against the eager one on one micro-batch of bf16 logits:
    largest differences, and milliseconds of forward + backward of each."""
    from reasonrl.algorithms import logprobs as L

    g = torch.Generator(device="cuda").manual_seed(0)
    z = (torch.randn(tokens, vocab, device="cuda", generator=g) * 3).to(torch.bfloat16).requires_grad_()
    t = torch.randint(0, vocab, (tokens,), device="cuda", generator=g)
    out = {}
    for name, fn in (("eager", lambda: (L.token_logprobs(z, t), L.entropy_from_logits(z.detach()))),
                     ("fused", lambda: L.logprobs_and_entropy(z, t, True, False))):  # fmt: skip

        def step(fn=fn):
            lp, ent = fn()
            lp.sum().backward()
            z.grad = None
            return lp.detach(), ent

        out[name] = step()
        ms = timed(step, 5)[0] * 1e3
        out[name + "_ms"] = round(ms, 2)
    res = {"lp_max_diff": (out["eager"][0] - out["fused"][0]).abs().max().item(),
           "ent_max_diff": (out["eager"][1] - out["fused"][1]).abs().max().item(),
           "eager_ms": out["eager_ms"], "fused_ms": out["fused_ms"]}  # fmt: skip
    print(
        f"log-probs + entropy of {tokens} x {vocab} bf16 logits, forward + backward: eager {res['eager_ms']} ms, "
        f"fused {res['fused_ms']} ms; max |diff| lp {res['lp_max_diff']:.2e} entropy {res['ent_max_diff']:.2e}"
    )
    return res


def timed(fn, steps: int) -> tuple[float, float]:
    """(median seconds per call after one warm-up, peak GiB allocated during the timed calls; 0 without
    CUDA)."""
    on_gpu = torch.cuda.is_available() and torch.cuda.is_initialized()
    sync = torch.cuda.synchronize if on_gpu else (lambda: None)
    fn()
    sync()
    if on_gpu:
        torch.cuda.reset_peak_memory_stats()
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2], torch.cuda.max_memory_allocated() / 2**30 if on_gpu else 0.0


def release(optimizer, model) -> None:
    """Drop an optimizer's state and the gradients, so that the other side's peak memory holds only
    its own (the first version of this script left the bare loop's AdamW state resident while ours
    was measured, and ours' while the bare loop was)."""
    if optimizer is not None:
        optimizer.state.clear()
    model.zero_grad(set_to_none=True)
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def profile(label: str, fn, top: int) -> None:
    """One more call of `fn` under torch.profiler: its `top` operators by device time (CPU time without
    CUDA), to see where a configuration's time goes (e.g. packed against padded with compiled layers)."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    on_gpu = torch.cuda.is_available() and torch.cuda.is_initialized()
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if on_gpu else [])
    with torch_profile(activities=acts) as prof:
        fn()
        if on_gpu:
            torch.cuda.synchronize()
    key = "cuda_time_total" if on_gpu else "cpu_time_total"
    print(f"profile of one step, {label}:")
    print(prof.key_averages().table(sort_by=key, row_limit=top, max_name_column_width=60), flush=True)


def measure(label, fn, steps, tokens, flops, peak, top: int = 0) -> dict:
    try:
        sec, mem = timed(fn, steps)
        if top:
            profile(label, fn, top)
    except torch.OutOfMemoryError:
        gc.collect()
        torch.cuda.empty_cache()
        print(f"{label}: out of memory")
        return {"oom": True}
    tps = tokens / sec
    row = {"sec_per_step": round(sec, 4), "tokens_per_s": round(tps), "peak_gib": round(mem, 2)}
    if peak:
        row["mfu"] = round(flops[0] * tps / (peak * 1e12), 3)
        row["mfu_attn"] = round(flops[1] * tps / (peak * 1e12), 3)
    mfu = f"MFU {row['mfu']:.1%} (with attention {row['mfu_attn']:.1%})" if peak else "MFU n/a (no GPU peak)"
    print(f"{label}: {sec:.3f} s/step  {tps:,.0f} tok/s  {mfu}  peak {mem:.1f} GiB", flush=True)
    return row


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--preset", default="custom", help="qwen2.5-0.5b, qwen2.5-1.5b, qwen2.5-7b or custom")
    ap.add_argument("--hidden", type=int, default=1024, help="custom shape only")
    ap.add_argument("--layers", type=int, default=16, help="custom shape only")
    ap.add_argument("--vocab", type=int, default=32000, help="custom shape only")
    ap.add_argument("--engine", choices=["single", "fsdp2"], default="single")
    ap.add_argument("--seqs", default="2048", help="comma list of sequence lengths")
    ap.add_argument("--ckpt", default="off", help="activation checkpointing: comma list of off, on")
    ap.add_argument("--chunk", type=int, default=0, help="model.logprob_chunk (0: full [B, T, V] logits)")
    ap.add_argument("--tokens-per-step", type=int, default=65536)
    ap.add_argument("--tokens-per-micro", type=int, default=16384)
    ap.add_argument("--attn", default="sdpa")
    ap.add_argument("--pack", type=int, default=0, help="uneven rows; also time model.pack_tokens=N on them")
    ap.add_argument("--bare", action="store_true", help="also time the bare PyTorch loop per row")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument(
        "--device", default="cuda", help="cuda, or cpu: the same code path in fp32 (a smoke test)"
    )
    ap.add_argument(
        "--entropy", choices=["on", "off"], default="on", help="the entropy metric (the trainer reports it)"
    )
    ap.add_argument(
        "--compile",
        action="store_true",
        help="model.compile: our side with compiled decoder layers (the bare loop stays eager)",
    )
    ap.add_argument("--profile", type=int, default=0, metavar="N",
                    help="after timing each of our configurations, profile one step: its N costliest ops")  # fmt: skip
    args = ap.parse_args(argv)
    args.seq_list = [int(s) for s in args.seqs.split(",")]
    if cuda(args.device) and not torch.cuda.is_available():
        print("no CUDA device: nothing to measure (--device cpu runs the code path on the CPU)")
        return {}
    name = torch.cuda.get_device_name() if cuda(args.device) else "cpu"
    peak = peak_tflops(name) if cuda(args.device) else None
    model = build_model(args)
    cfg = model.config
    out = {"bench": "gpu_train_step", "device": name, "preset": args.preset, "engine": args.engine,
           "params": sum(p.numel() for p in model.parameters()), "chunk": args.chunk, "attn": args.attn,
           "entropy": args.entropy, "compile": args.compile, "pack": args.pack,
           "torch": torch.__version__, "rows": []}  # fmt: skip
    if cuda(args.device):  # bf16 logits through the compiled kernels: a GPU check
        out["fused_check"] = fused_check(cfg.vocab_size)
    if args.compile:  # as model.compile does in trainer.setup: in place, before sharding
        from reasonrl.engines.compiled import compile_decoder_layers

        compile_decoder_layers(model)
    engine = make_engine(model, args.engine, args.device)
    bare_opt = torch.optim.AdamW(model.parameters(), lr=1e-6) if args.bare else None
    for ckpt in args.ckpt.split(","):
        if ckpt == "on":
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        else:
            model.gradient_checkpointing_disable()
        for seq in args.seq_list:
            rows, micro = args.tokens_per_step // seq, max(1, args.tokens_per_micro // seq)
            batch = make_batch(cfg.vocab_size, rows, seq, uneven=bool(args.pack))
            flops = train_flops_per_token(cfg, seq)
            tokens = int(batch.attention_mask.sum())  # real tokens (all of them unless --pack)
            head = (
                f"{args.preset} {args.engine} seq {seq} rows {rows} micro {micro} ckpt {ckpt} chunk {args.chunk} "
                f"entropy {args.entropy}{' compiled' if args.compile else ''}"
            )
            release(bare_opt, model)
            row = {"seq": seq, "rows": rows, "micro": micro, "ckpt": ckpt, "tokens_per_step": tokens,
                   "reasonrl": measure(f"{head}  reasonrl", ours_step(engine, batch, micro, args.chunk, args.entropy == "on"),
                                       args.steps, tokens, flops, peak, args.profile)}  # fmt: skip
            if args.pack:
                row["real_token_frac"] = round(tokens / (rows * seq), 3)
                row["reasonrl_packed"] = measure(f"{head}  reasonrl packed {args.pack}",
                                                 ours_step(engine, batch, micro, args.chunk, args.entropy == "on", args.pack),
                                                 args.steps, tokens, flops, peak, args.profile)  # fmt: skip
                if "sec_per_step" in row["reasonrl_packed"] and "sec_per_step" in row["reasonrl"]:
                    row["packed_speedup"] = round(
                        row["reasonrl"]["sec_per_step"] / row["reasonrl_packed"]["sec_per_step"], 3
                    )
            if bare_opt is not None:
                release(engine.optimizer, model)
                with torch.compiler.set_stance("force_eager"):  # the bare loop is plain eager PyTorch
                    row["bare"] = measure(f"{head}  bare", bare_step(model, bare_opt, batch, micro, args.device), args.steps,
                                          tokens, flops, peak)  # fmt: skip
                if "sec_per_step" in row["bare"] and "sec_per_step" in row["reasonrl"]:
                    row["ratio"] = round(row["bare"]["sec_per_step"] / row["reasonrl"]["sec_per_step"], 3)
            out["rows"].append(row)
    print(json.dumps(out))
    if torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()
    return out


if __name__ == "__main__":
    main()
    sys.exit(0)
