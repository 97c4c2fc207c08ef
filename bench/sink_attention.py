"""Training forward / backward of a model with attention sinks (a tiny gpt-oss: every other layer
sliding, grouped-query heads), its sinks through SDPA with one extra key vs written out, side by side in
one run: packed (`pack_attention.sink_attention` vs explicit attention per group of sequences, what
packs ran before) and padded (`models.sinks`, what `load_policy` now loads such a model with, vs
transformers' eager attention, the only one it runs them with). Seconds per forward + backward, the
largest tensor each creates (a dispatch probe; SDPA's fused kernels keep their blocks out of sight, as
they keep them out of memory), on CUDA the peak memory too, and the largest log-prob gap.

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
    from reasonrl.engines.single import completion_logprobs
    from reasonrl.models.sinks import SINK_SDPA, use_sink_sdpa

    model, batch = model_and_batch(args.rows, args.length, args.device)
    budget = batch.input_ids.shape[1] * args.rows
    assert use_sink_sdpa(model)
    configs = [c for m in model.modules() if hasattr(c := getattr(m, "config", None), "_attn_implementation")]
    sdpa_sinks, written_out = packing.sink_attention, packing.explicit_attention

    def use(name: str) -> None:  # packed: what a pack runs for its sinks; padded: the model's attention
        packing.sink_attention = sdpa_sinks if name == "packed, SDPA" else (
            lambda q, k, v, mask, scaling, dropout, sinks: written_out(q, k, v, mask, scaling, dropout, None, sinks))  # fmt: skip
        for c in configs:
            c._attn_implementation = "eager" if name == "padded, eager" else SINK_SDPA
            setattr(c, packing.BASE_ATTENTION, c._attn_implementation)

    def step(name: str):
        use(name)
        model.zero_grad()
        if name.startswith("packed"):
            lp, _ = packing.packed_logprobs(model, batch, pack_tokens=budget)
        else:
            lp, _ = completion_logprobs(model, batch)
        (lp * batch.mask).sum().backward()
        return lp.detach()

    report: dict = {
        "bench": "sink_attention",
        "rows": args.rows,
        "length": args.length,
        "device": args.device,
    }
    names = ("packed, written out", "packed, SDPA", "padded, eager", "padded, SDPA")
    results: dict = {}
    try:
        for name in names + names:  # alternating; the later run of each kept
            if args.device == "cuda":
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats()
            lp = step(name)
            t0 = time.perf_counter()
            for _ in range(args.reps):
                step(name)
            if args.device == "cuda":
                torch.cuda.synchronize()
            results[name] = {"seconds": (time.perf_counter() - t0) / args.reps, "logprobs": lp}
            if args.device == "cuda":
                results[name]["peak_mib"] = torch.cuda.max_memory_allocated() / 2**20
        for name in names:
            results[name]["largest_mib"] = largest_tensor(lambda: step(name)) / 2**20  # noqa: B023
    finally:
        packing.sink_attention = sdpa_sinks
    for name, r in results.items():
        report[name] = {k: round(v, 4) for k, v in r.items() if k != "logprobs"}
    for kind, before, after in (
        ("packed", "packed, written out", "packed, SDPA"),
        ("padded", "padded, eager", "padded, SDPA"),
    ):
        report[f"{kind}_speedup"] = round(results[before]["seconds"] / results[after]["seconds"], 3)
        report[f"{kind}_logprob_gap"] = (
            (results[after]["logprobs"] - results[before]["logprobs"]).abs().max().item()
        )
        print(f"{kind} {args.rows} x {args.length} tokens, forward + backward: {before} {report[before]['seconds']:.3f} s "
              f"(largest tensor {report[before]['largest_mib']:.1f} MiB), SDPA {report[after]['seconds']:.3f} s "
              f"({report[after]['largest_mib']:.1f} MiB): {report[kind + '_speedup']}x; log-probs "
              f"{report[kind + '_logprob_gap']:.1e} apart")  # fmt: skip
    print(json.dumps(report))
    return report


if __name__ == "__main__":
    main()
