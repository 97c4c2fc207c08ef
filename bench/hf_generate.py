"""Rollout generation with the HF engine vs bare `model.generate(output_scores=True)` (how the engine
read sampler log-probs before): seconds, tokens per second, peak accelerator memory, and the largest
log-prob difference between the two on the same seed. Random-initialised Qwen2-shaped model, no
download; CUDA if present, else a small CPU configuration. Ends with one JSON line.

    python bench/hf_generate.py --rows 64 --new 256 --vocab 151936 --hidden 896 --layers 8
"""

from __future__ import annotations

import argparse
import json
import time

import torch


def main(argv=None) -> dict:
    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    from reasonrl.rollout.base import SamplingParams
    from reasonrl.rollout.hf import HFRolloutEngine

    cuda = torch.cuda.is_available()
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=64 if cuda else 8)
    ap.add_argument("--new", type=int, default=256 if cuda else 32)
    ap.add_argument("--vocab", type=int, default=151936 if cuda else 32000)
    ap.add_argument("--hidden", type=int, default=896 if cuda else 64)
    ap.add_argument("--layers", type=int, default=8 if cuda else 2)
    ap.add_argument(
        "--repeats", type=int, default=2, help="timed runs of each side, interleaved; min is kept"
    )
    args = ap.parse_args(argv)
    device, dtype = ("cuda", torch.bfloat16) if cuda else ("cpu", torch.float32)
    cfg = Qwen2Config(vocab_size=args.vocab, hidden_size=args.hidden, intermediate_size=args.hidden * 4,
                      num_hidden_layers=args.layers, num_attention_heads=max(1, args.hidden // 64),
                      num_key_value_heads=max(1, args.hidden // 448), eos_token_id=args.vocab + 1)  # fmt: skip
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(cfg).to(device=device, dtype=dtype).eval()
    vocab = {"<pad>": 0, "a": 1}
    tok = PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer(models.WordLevel(vocab, unk_token="<pad>")), pad_token="<pad>"
    )
    tok.eos_token_id = args.vocab + 1  # never drawn: every row generates all `new` tokens
    prompts = [[1 + (i % 7), 2, 3, 4, 5, 6, 7, 8] for i in range(args.rows)]
    params = SamplingParams(n=1, temperature=1.0, max_new_tokens=args.new, seed=1)
    out: dict = {"bench": "hf_generate", "device": torch.cuda.get_device_name() if cuda else "cpu",
                 "rows": args.rows, "new_tokens": args.new, "vocab": args.vocab}  # fmt: skip

    def timed(fn):
        if cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        t0 = time.perf_counter()
        res = fn()
        if cuda:
            torch.cuda.synchronize()
        sec = time.perf_counter() - t0
        peak = torch.cuda.max_memory_allocated() / 2**30 if cuda else None
        return res, {"seconds": round(sec, 3), "tokens_per_s": round(args.rows * args.new / sec),
                     "peak_gib": peak and round(peak, 2)}  # fmt: skip

    engine = HFRolloutEngine(model, tok)
    engine.generate(prompts[:2], SamplingParams(n=1, max_new_tokens=4, seed=0))  # warm-up

    def bare():
        torch.manual_seed(int(torch.randint(0, 2**62, (1,), generator=torch.Generator().manual_seed(1))))
        ids = torch.tensor(prompts, device=device)
        res = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), do_sample=True, temperature=1.0,
                             top_k=0, top_p=1.0, max_new_tokens=args.new, return_dict_in_generate=True,
                             output_scores=True, pad_token_id=0, eos_token_id=args.vocab + 1)  # fmt: skip
        scores = torch.stack(res.scores, dim=1).float()
        return torch.log_softmax(scores, -1).gather(-1, res.sequences[:, 8:, None]).squeeze(-1).cpu()

    scores_gib = args.rows * args.new * args.vocab * 4 * 2 / 2**30  # the score list, then its stacked copy
    free_gib = torch.cuda.mem_get_info()[0] / 2**30 if cuda else float("inf")
    for _ in range(args.repeats):
        ours, stats = timed(lambda: engine.generate(prompts, params))
        out["reasonrl"] = min(out.get("reasonrl", stats), stats, key=lambda d: d["seconds"])
        if scores_gib > 0.9 * free_gib:
            out["bare_output_scores"] = {
                "skipped": f"needs about {scores_gib:.0f} GiB for scores, {free_gib:.0f} GiB free"
            }
            continue
        theirs, stats = timed(bare)
        out["bare_output_scores"] = min(
            out.get("bare_output_scores", stats), stats, key=lambda d: d["seconds"]
        )
    # the engine's log-probs against a teacher-forced full forward over its own samples (first 8 rows)
    seqs = torch.tensor([prompts[i] + ours[i][0].token_ids for i in range(min(8, args.rows))], device=device)
    with torch.no_grad():
        logits = model(input_ids=seqs).logits[:, 7:-1].float()
    ref = torch.log_softmax(logits, -1).gather(-1, seqs[:, 8:, None]).squeeze(-1).cpu()
    got = torch.tensor([ours[i][0].sampler_logprobs for i in range(len(seqs))])
    out["recompute_max_abs_diff"] = round(float((got - ref).abs().max()), 5)
    out["recompute_mean_abs_diff"] = round(float((got - ref).abs().mean()), 6)
    if "seconds" in out["bare_output_scores"]:
        mine = torch.tensor([c[0].sampler_logprobs for c in ours])
        # equal on CPU (same seed, same kernels); on GPU the two runs may draw different tokens
        out["max_logprob_diff"] = float((mine - theirs).abs().max())
        out["speed_ratio"] = round(out["bare_output_scores"]["seconds"] / out["reasonrl"]["seconds"], 3)
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    main()
