"""Rollout throughput: each available engine through reasonrl's rollout path (`engine.generate`, what
`rollout.scored.generate_and_score` calls: n samples per prompt, per-token sampler log-probs, EOS cut,
decoding) vs the bare library on the same prompts and sampling settings, in one run, alternating.

  hf:    HFRolloutEngine.generate          vs  model.generate(do_sample, num_return_sequences=n)
  vllm:  VLLMRolloutEngine.generate        vs  vllm.LLM.generate on the same LLM (no log-probs)
  vllm+lp: the same, the bare call also asking for the sampled tokens' log-probs (logprobs=0)
  cb:    transformers continuous batching (`model.generate_batch`, paged KV cache, sampled tokens'
         log-probs returned), reported beside bare generate (no reasonrl engine uses it yet; --engines cb)

Completion tokens per second (every row generates max_new tokens: the EOS id is never drawn), median
of --repeats runs after one warm-up, ratio ours / bare (goal >= 0.95), and on CUDA the peak memory of
each side. Random-initialised Qwen2-shaped model (a custom shape, or --preset with a published Qwen2.5
config) saved to a temporary directory (vLLM loads from files), fp32 on CPU, bf16 on CUDA. Ends with
one JSON line.

    python bench/rollout_throughput.py [--engines hf,vllm] [--prompts 16] [--n 8] [--new 64]
    python bench/rollout_throughput.py --engines hf,cb --preset qwen2.5-0.5b --new 512   # on a GPU
    python bench/rollout_throughput.py --engines hf --model demo:addsub --new 48   # real lengths

With --model (a model path or `demo:addsub`) the prompts are the task's (--task) and completions end
at EOS, as in training: both sides are credited with the tokens they generated up to and including
each row's EOS (reasonrl's HF engine drops finished rows from the batch; `generate` keeps them).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from model_shapes import qwen2_config  # noqa: E402


def build(path: str, args, device: str, dtype):
    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    if args.preset:
        cfg = qwen2_config(args.preset, context=args.prompt_len + args.new + 64)
        args.vocab, args.hidden, args.layers = cfg.vocab_size, cfg.hidden_size, cfg.num_hidden_layers
        cfg.eos_token_id, cfg.pad_token_id = args.vocab, 0
    else:
        cfg = Qwen2Config(vocab_size=args.vocab, hidden_size=args.hidden, intermediate_size=args.hidden * 3,
                          num_hidden_layers=args.layers, num_attention_heads=args.hidden // 32,
                          num_key_value_heads=max(1, args.hidden // 128), max_position_embeddings=1024,
                          eos_token_id=args.vocab, pad_token_id=0, tie_word_embeddings=False)  # fmt: skip
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(cfg)
    model.save_pretrained(path)
    # the EOS id lies outside the model's vocabulary: never drawn, so every row runs its full length
    vocab = {f"t{i}": i for i in range(args.vocab + 1)}
    tok = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.WordLevel(vocab, unk_token="t0")),
                                  pad_token="t0", eos_token=f"t{args.vocab}")  # fmt: skip
    tok.save_pretrained(path)
    return model.to(device=device, dtype=dtype).eval(), tok


def real_model(args, device: str):
    """(model, tokenizer, prompt token ids) of a real model and --prompts of its task's problems."""
    from reasonrl.data.prompts import encode_prompts
    from reasonrl.data.tasks import generate
    from reasonrl.models.loading import load_policy, resolve_model_path

    model, tok = load_policy(resolve_model_path(args.model), device=device, log=lambda *a: None)
    problems = generate(args.task, args.prompts, seed=0, difficulty=2, split="train")
    cfg = model.config
    args.vocab, args.hidden, args.layers = cfg.vocab_size, cfg.hidden_size, cfg.num_hidden_layers
    return model.eval(), tok, encode_prompts(tok, problems)


def peak_gib(cuda: bool) -> float:
    """Peak GPU memory allocated since the last call (0 on CPU)."""
    if not cuda:
        return 0.0
    peak = torch.cuda.max_memory_allocated() / 2**30
    torch.cuda.reset_peak_memory_stats()
    return peak


def timed(fn, sync) -> tuple[float, object]:
    sync()
    t0 = time.perf_counter()
    out = fn()
    sync()
    return time.perf_counter() - t0, out


def main(argv=None) -> dict:
    from reasonrl.rollout.base import SamplingParams

    cuda = torch.cuda.is_available()
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--engines", default="hf,vllm", help="comma list of hf, vllm, cb (missing ones skipped)")
    ap.add_argument("--prompts", type=int, default=16)
    ap.add_argument("--n", type=int, default=8, help="samples per prompt")
    ap.add_argument("--new", type=int, default=64, help="new tokens per sample")
    ap.add_argument("--prompt-len", type=int, default=32)
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--hidden", type=int, default=896 if cuda else 256)
    ap.add_argument("--layers", type=int, default=24 if cuda else 4)
    ap.add_argument(
        "--preset", default="", help="a Qwen2.5 shape from bench/model_shapes.py (replaces the three above)"
    )
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--model", default="", help="a real model (path or demo:addsub) instead of a random one")
    ap.add_argument("--task", default="addsub", help="with --model: the built-in task whose prompts it gets")
    args = ap.parse_args(argv)
    device, dtype = ("cuda", torch.bfloat16) if cuda else ("cpu", torch.float32)
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    tmp = tempfile.TemporaryDirectory(prefix="rollout-bench-")
    if args.model:
        model, tok, prompts = real_model(args, device)
        eos, pad = tok.eos_token_id, tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    else:
        model, tok = build(tmp.name, args, device, dtype)
        gen = torch.Generator().manual_seed(1)
        prompts = [torch.randint(1, args.vocab - 1, (args.prompt_len,), generator=gen).tolist()
                   for _ in range(args.prompts)]  # fmt: skip
        eos, pad = args.vocab, 0
    params = SamplingParams(n=args.n, temperature=1.0, max_new_tokens=args.new, seed=3)
    tokens = args.prompts * args.n * args.new
    report: dict = {"bench": "rollout_throughput", "device": torch.cuda.get_device_name() if cuda else "cpu",
                    "prompts": args.prompts, "n": args.n, "new": args.new, "hidden": args.hidden,
                    "layers": args.layers, "vocab": args.vocab, "preset": args.preset or "custom",
                    "model": args.model or "random"}  # fmt: skip
    width = max(len(p) for p in prompts)
    ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompts], device=device)  # left-padded
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts], device=device)

    def bare_generate():
        return model.generate(input_ids=ids, attention_mask=mask, do_sample=True,
                              temperature=1.0, top_k=0, top_p=1.0, num_return_sequences=args.n,
                              max_new_tokens=args.new, pad_token_id=pad, eos_token_id=eos)  # fmt: skip

    def generated(out) -> int:
        """Completion tokens in one side's output, each row up to and including its first EOS."""
        if isinstance(out, torch.Tensor):  # generate: [rows, width + steps]
            rows = out[:, width:].tolist()
            return sum(r.index(eos) + 1 if eos in r else len(r) for r in rows)
        return sum(len(c.token_ids) for g in out for c in g)  # HFRolloutEngine: completions

    sides: dict[str, tuple] = {}
    wanted = args.engines.split(",")
    if "hf" in wanted:
        from reasonrl.rollout.hf import HFRolloutEngine

        eng = HFRolloutEngine(model, tok)
        sides["hf"] = (lambda: eng.generate(prompts, params), bare_generate)
    if "cb" in wanted:
        from transformers import ContinuousBatchingConfig, GenerationConfig

        # each prompt repeated n times: transformers 5.17's generate_batch returned one sequence per
        # prompt with num_return_sequences=8 (seen on the H100 image)
        gc = GenerationConfig(max_new_tokens=args.new, do_sample=True, temperature=1.0, top_k=0, top_p=1.0,
                              eos_token_id=args.vocab, pad_token_id=0)  # fmt: skip
        # the paged cache sized to this workload (every row resident at once, the whole prefill in one
        # batch); left to its defaults it sizes itself from the device's memory, and on a CPU with
        # 24 GiB of RAM setting up its buffers took ~8 s of every call
        rows, page = args.prompts * args.n, 256
        cbc = ContinuousBatchingConfig(return_logprobs=True, page_size=page, max_batch_tokens=rows * width,
                                       num_blocks=rows * -(-(width + args.new) // page) + 1)  # fmt: skip
        repeated = [p for p in prompts for _ in range(args.n)]

        def cb():
            out = model.generate_batch(inputs=repeated, generation_config=gc, continuous_batching_config=cbc,
                                       progress_bar=False)  # fmt: skip
            got = sum(len(o.generated_tokens) for o in out.values())
            if got != tokens:  # the figure would be per token it never generated
                raise SystemExit(f"generate_batch returned {got} tokens, expected {tokens}")
            return out

        sides["cb"] = (cb, bare_generate)
    if "vllm" in wanted and importlib.util.find_spec("vllm") is not None:
        import vllm

        from reasonrl.rollout.vllm import VLLMRolloutEngine

        veng = VLLMRolloutEngine(model, tok, kv_cache_gb=2.0)
        reqs = [{"prompt_token_ids": p} for p in prompts]
        bare_sp = vllm.SamplingParams(n=args.n, temperature=1.0, max_tokens=args.new, ignore_eos=True,
                                      detokenize=False, seed=3)  # fmt: skip
        sides["vllm"] = (lambda: veng.generate(prompts, params),
                         lambda: veng.llm.generate(reqs, bare_sp, use_tqdm=False))  # fmt: skip
        # the same bare call asking for the sampled tokens' log-probs, as RL needs: separates the
        # engine's own overhead from the cost of computing log-probs
        lp_sp = vllm.SamplingParams(n=args.n, temperature=1.0, max_tokens=args.new, ignore_eos=True,
                                    detokenize=False, seed=3, logprobs=0)  # fmt: skip
        sides["vllm+lp"] = (lambda: veng.generate(prompts, params),
                            lambda: veng.llm.generate(reqs, lp_sp, use_tqdm=False))  # fmt: skip
    for name, (ours, bare) in sides.items():
        for side, fn in (
            ("ours", ours),
            ("bare", bare),
        ):  # warm-up (first call at a shape compiles / allocates)
            t, _ = timed(fn, sync)
            print(
                f"{name}: warm-up {side} {t:.1f} s", flush=True
            )  # a run cut short still says how far it got
        t_ours, t_bare, m_ours, m_bare, n_ours, n_bare = [], [], 0.0, 0.0, [], []
        for _ in range(args.repeats):
            t, out = timed(ours, sync)
            t_ours.append(t)
            n_ours.append(generated(out) if args.model and name == "hf" else tokens)
            m_ours = max(m_ours, peak_gib(cuda))
            t, out = timed(bare, sync)
            t_bare.append(t)
            n_bare.append(generated(out) if args.model else tokens)
            m_bare = max(m_bare, peak_gib(cuda))
        # tokens per second of each run, median over the repeats
        o = statistics.median(n / t for n, t in zip(n_ours, t_ours))
        b = statistics.median(n / t for n, t in zip(n_bare, t_bare))
        if args.model:
            report[name + "_mean_completion_tokens"] = round(
                statistics.mean(n_ours) / (args.prompts * args.n), 2
            )
        report[name] = {"ours_tok_s": round(o, 1), "bare_tok_s": round(b, 1), "ratio": round(o / b, 3)}
        label = "generate_batch" if name == "cb" else "reasonrl"
        mem = ""
        if cuda:
            report[name].update(ours_peak_gib=round(m_ours, 2), bare_peak_gib=round(m_bare, 2))
            mem = f"   peak {m_ours:.2f} / {m_bare:.2f} GiB"
        print(
            f"{name:8s} {label}: {o:9.1f} tok/s   bare: {b:9.1f} tok/s   ratio {o / b:.3f}{mem}", flush=True
        )
    print(json.dumps(report))
    return report


if __name__ == "__main__":
    main()
