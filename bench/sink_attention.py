"""Packed training forward / backward of a model with attention sinks (a tiny gpt-oss: every other layer
sliding, grouped-query heads), its sinks through SDPA with one extra key (`pack_attention.sink_attention`,
what packs run) vs written out as explicit attention (the softmax over [scores, sink] per group of
sequences, what they ran before), side by side in one run: seconds per forward + backward, the largest
tensor either creates (a dispatch probe; SDPA's fused kernels keep their blocks out of sight, as they
keep them out of memory), on CUDA the peak memory too, and the largest log-prob gap between the two.

  .venv/bin/python bench/sink_attention.py [--rows 4] [--length 1024] [--reps 3] [--device cpu]
"""

from __future__ import annotations

import argparse
import json
import time

import torch


def model_and_batch(rows: int, length: int, device: str):
    import transformers as tf

    from reasonrl.types import TrainBatch

    torch.manual_seed(0)
    cfg = tf.GptOssConfig(vocab_size=512, hidden_size=256, intermediate_size=256, num_hidden_layers=2,
                          num_attention_heads=8, num_key_value_heads=2, head_dim=64, sliding_window=128,
                          max_position_embeddings=2 * length, num_local_experts=4, num_experts_per_tok=2,
                          rope_parameters={"rope_type": "default", "rope_theta": 150000.0})  # fmt: skip
    model = tf.AutoModelForCausalLM.from_config(cfg, attn_implementation="eager").float().to(device)
    prompt = 16
    ids = torch.randint(2, 512, (rows, prompt + length), device=device)
    mask = torch.ones_like(ids)
    batch = TrainBatch(input_ids=ids, attention_mask=mask, mask=mask[:, prompt:].bool(), prompt_len=prompt)
    return model, batch


def largest_tensor(step) -> int:
    from torch.utils._python_dispatch import TorchDispatchMode

    biggest = [0]

    class Probe(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            for t in out if isinstance(out, (tuple, list)) else (out,):
                if isinstance(t, torch.Tensor):
                    biggest[0] = max(biggest[0], t.numel() * t.element_size())
            return out

    with Probe():
        step()
    return biggest[0]


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=4)
    ap.add_argument("--length", type=int, default=1024)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args(argv)
    from reasonrl.engines import packing

    model, batch = model_and_batch(args.rows, args.length, args.device)
    budget = batch.input_ids.shape[1] * args.rows

    def step():
        model.zero_grad()
        lp, _ = packing.packed_logprobs(model, batch, pack_tokens=budget)
        (lp * batch.mask).sum().backward()
        return lp.detach()

    sdpa_sinks, written_out = packing.sink_attention, packing.explicit_attention

    def use(name: str) -> None:  # what a pack runs for its sinks
        packing.sink_attention = sdpa_sinks if name == "sdpa" else (
            lambda q, k, v, mask, scaling, dropout, sinks: written_out(q, k, v, mask, scaling, dropout, None, sinks))  # fmt: skip

    report: dict = {
        "bench": "sink_attention",
        "rows": args.rows,
        "length": args.length,
        "device": args.device,
    }
    results: dict = {}
    try:
        for name in ("explicit", "sdpa", "explicit", "sdpa"):  # alternating; the later run of each kept
            use(name)
            if args.device == "cuda":
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats()
            lp = step()
            t0 = time.perf_counter()
            for _ in range(args.reps):
                step()
            if args.device == "cuda":
                torch.cuda.synchronize()
            results[name] = {"seconds": (time.perf_counter() - t0) / args.reps, "logprobs": lp}
            if args.device == "cuda":
                results[name]["peak_mib"] = torch.cuda.max_memory_allocated() / 2**20
        for name in ("explicit", "sdpa"):
            use(name)
            results[name]["largest_mib"] = largest_tensor(step) / 2**20
    finally:
        packing.sink_attention = sdpa_sinks
    gap = (results["sdpa"]["logprobs"] - results["explicit"]["logprobs"]).abs().max().item()
    for name, r in results.items():
        report[name] = {k: round(v, 4) for k, v in r.items() if k != "logprobs"}
    report["speedup"] = round(results["explicit"]["seconds"] / results["sdpa"]["seconds"], 3)
    report["logprob_gap"] = gap
    print(f"{args.rows} x {args.length} tokens, forward + backward: written out {report['explicit']['seconds']:.3f} s "
          f"(largest tensor {report['explicit']['largest_mib']:.1f} MiB), SDPA {report['sdpa']['seconds']:.3f} s "
          f"({report['sdpa']['largest_mib']:.1f} MiB): {report['speedup']}x; log-probs {gap:.1e} apart")  # fmt: skip
    print(json.dumps(report))
    return report


if __name__ == "__main__":
    main()
