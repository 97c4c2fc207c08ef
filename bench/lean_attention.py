"""Training forward / backward of a model whose attention transformers runs eager only, with reasonrl's
attention for it vs the scores written out, side by side in one run. `--kind sinks`: attention sinks
(a tiny gpt-oss), through SDPA with one extra key (`models.sinks`, `pack_attention.sink_attention`);
`--kind softcap`: logit soft-capping (a tiny Gemma 2), in blocks of queries with its own backward
(`models.softcap`). Both models: every other layer sliding, grouped-query heads. Packed (reasonrl's
vs explicit attention per group of sequences, what packs ran before) and padded (what `load_policy`
loads such a model with vs transformers' eager attention). Seconds per forward + backward, the largest
tensor each creates (a dispatch probe; SDPA's fused kernels keep their blocks out of sight, as they
keep them out of memory), on CUDA the peak memory too, and the largest log-prob gap.

  .venv/bin/python bench/lean_attention.py [--kind sinks] [--rows 4] [--length 1024] [--reps 3] [--device cpu]
"""

from __future__ import annotations

import argparse
import json
import time

import torch


def model_and_batch(kind: str, rows: int, length: int, device: str):
    import transformers as tf

    from reasonrl.types import TrainBatch

    torch.manual_seed(0)
    shape = dict(vocab_size=512, hidden_size=256, intermediate_size=256, num_hidden_layers=2, num_attention_heads=8,
                 num_key_value_heads=2, head_dim=64, sliding_window=128, max_position_embeddings=2 * length)  # fmt: skip
    if kind == "sinks":
        cfg = tf.GptOssConfig(**shape, num_local_experts=4, num_experts_per_tok=2,
                              rope_parameters={"rope_type": "default", "rope_theta": 150000.0})  # fmt: skip
    else:
        cfg = tf.Gemma2Config(**shape, attn_logit_softcapping=50.0, final_logit_softcapping=30.0)
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


def kept_for_backward(step) -> int:
    """Bytes of the tensors autograd keeps for the backward (each storage once): the activation memory
    that grows with the square of the sequence where scores are kept."""
    seen: dict = {}

    def pack(t):
        seen[(t.untyped_storage().data_ptr(), t.device)] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        step()
    return sum(seen.values())


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kind", choices=("sinks", "softcap"), default="sinks")
    ap.add_argument("--rows", type=int, default=4)
    ap.add_argument("--length", type=int, default=1024)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args(argv)
    from reasonrl.engines import packing
    from reasonrl.engines.single import completion_logprobs
    from reasonrl.models import sinks, softcap

    model, batch = model_and_batch(args.kind, args.rows, args.length, args.device)
    budget = batch.input_ids.shape[1] * args.rows
    # reasonrl's attention for the model, and its packs' function: the one switched, the other written out
    lean, (ours, attr) = {"sinks": (sinks.use_sink_sdpa, (sinks.SINK_SDPA, "sink_attention")),
                          "softcap": (softcap.use_softcap_attention, (softcap.SOFTCAP, "softcap_attention"))}[args.kind]  # fmt: skip
    assert lean(model)
    configs = [c for m in model.modules() if hasattr(c := getattr(m, "config", None), "_attn_implementation")]
    packed_ours, written_out = getattr(packing, attr), packing.explicit_attention
    by_hand = {  # the same call as explicit attention per group of sequences
        "sink_attention": lambda q, k, v, mask, scaling, dropout, s: written_out(q, k, v, mask, scaling, dropout, None, s),
        "softcap_attention": lambda q, k, v, mask, scaling, cap: written_out(q, k, v, mask, scaling, 0.0, cap, None),
    }[attr]  # fmt: skip
    ours_name = {"sinks": "SDPA", "softcap": "blocks"}[args.kind]

    def use(name: str) -> None:  # packed: what a pack runs for its sequences; padded: the model's attention
        setattr(packing, attr, packed_ours if name == f"packed, {ours_name}" else by_hand)
        for c in configs:
            c._attn_implementation = "eager" if name == "padded, eager" else ours
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
        "bench": "lean_attention",
        "kind": args.kind,
        "rows": args.rows,
        "length": args.length,
        "device": args.device,
    }
    names = ("packed, written out", f"packed, {ours_name}", "padded, eager", f"padded, {ours_name}")
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
            results[name]["kept_mib"] = kept_for_backward(lambda: step(name)) / 2**20  # noqa: B023
    finally:
        setattr(packing, attr, packed_ours)
    for name, r in results.items():
        report[name] = {k: round(v, 4) for k, v in r.items() if k != "logprobs"}
    for kind, before, after in (
        ("packed", "packed, written out", f"packed, {ours_name}"),
        ("padded", "padded, eager", f"padded, {ours_name}"),
    ):
        report[f"{kind}_speedup"] = round(results[before]["seconds"] / results[after]["seconds"], 3)
        report[f"{kind}_logprob_gap"] = (
            (results[after]["logprobs"] - results[before]["logprobs"]).abs().max().item()
        )
        print(f"{kind} {args.rows} x {args.length} tokens, forward + backward: {before} {report[before]['seconds']:.3f} s "
              f"(largest tensor {report[before]['largest_mib']:.1f} MiB, kept for the backward "
              f"{report[before]['kept_mib']:.0f} MiB), {ours_name} {report[after]['seconds']:.3f} s "
              f"({report[after]['largest_mib']:.1f} MiB, {report[after]['kept_mib']:.0f} MiB): {report[kind + '_speedup']}x; log-probs "
              f"{report[kind + '_logprob_gap']:.1e} apart")  # fmt: skip
    print(json.dumps(report))
    return report


if __name__ == "__main__":
    main()
