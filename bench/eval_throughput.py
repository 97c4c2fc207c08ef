"""Evaluation speed: `reasonrl eval --benchmarks gsm8k` vs EleutherAI lm-evaluation-harness (HF backend) on
the same model, the same local GSM8K-shaped problems, greedy, the same max new tokens, one after the
other in one run; plus the rollout engine's raw generation on the same prompts in the same batches
(the ceiling: no scoring, no files), alternating with reasonrl `--repeats` times (medians: the machine's
noise moves single runs by 10% and more). Every side's time includes loading the model. Prints samples/s
of each and the ratios, and where reasonrl's time went (its timing.json: generating, waiting for
scoring, the rest), ending with one JSON line.

    python bench/eval_throughput.py [--model demo:addsub] [--problems 256] [--max-tokens 48] [--repeats 3]

Needs lm-eval (`pip install 'reasonrl[lm-eval]'`). Both sides run offline on local files.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

LM_EVAL_TASK = """task: bench_gsm8k_local
dataset_path: json
dataset_kwargs:
  data_files:
    test: {path}
test_split: test
output_type: generate_until
doc_to_text: "{{{{question}}}}"
doc_to_target: "{{{{answer}}}}"
generation_kwargs:
  until: ["<|endoftext|>"]
  do_sample: false
  max_gen_toks: {max_tokens}
metric_list:
  - metric: exact_match
"""


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="demo:addsub")
    ap.add_argument("--problems", type=int, default=256)
    ap.add_argument("--max-tokens", type=int, default=48)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--device", default="cpu", help="cpu or cuda (all three sides)")
    ap.add_argument("--repeats", type=int, default=3, help="reasonrl and the raw engine, alternating")
    args = ap.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    from reasonrl.eval.benchmarks import BENCHMARKS
    from reasonrl.eval.runner import run_benchmarks
    from reasonrl.models.loading import resolve_model_path

    model = resolve_model_path(args.model)
    tmp = Path(tempfile.mkdtemp(prefix="eval-bench-"))
    rows = [
        {"question": f"What is {i} + {i % 7}?", "answer": f"so\n#### {i + i % 7}"}
        for i in range(args.problems)
    ]
    (tmp / "gsm8k.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    report: dict = {"bench": "eval_throughput", "model": args.model, "problems": args.problems,
                    "max_tokens": args.max_tokens, "device": args.device}  # fmt: skip

    # warm-up for all three: imports, file cache, and one generation at the chunk shape (the first
    # calls in a process are slower, and the side timed first would pay for them)
    from reasonrl.data.prompts import encode_prompts
    from reasonrl.eval.benchmarks import load_benchmark
    from reasonrl.models.loading import load_policy
    from reasonrl.rollout.base import SamplingParams
    from reasonrl.rollout.hf import HFRolloutEngine

    warm_policy, warm_tok = load_policy(model, device=args.device, log=lambda *a: None)
    warm_ids = encode_prompts(warm_tok, load_benchmark(BENCHMARKS.get("gsm8k"), tmp)[: args.batch])
    HFRolloutEngine(warm_policy, warm_tok).generate(warm_ids, SamplingParams.greedy(args.max_tokens))
    del warm_policy
    # and the verifier workers' server: it imports math-verify (sympy) and warms its parser once per
    # process (rewards.warm_up; 4.1 s for the import alone on the H100 machine's cold disk), which a
    # long eval or a training run pays once, beside loading the model; timed here on its own
    from reasonrl.rewards.runner import RewardRunner, preload_modules

    warm_problems = load_benchmark(BENCHMARKS.get("gsm8k"), tmp)[:1]
    t0 = time.perf_counter()
    with RewardRunner(preload=preload_modules(warm_problems)) as warm_scorer:
        warm_scorer.score([""], warm_problems)
    report["verifier_cold_start_s"] = round(time.perf_counter() - t0, 2)
    problems = load_benchmark(BENCHMARKS.get("gsm8k"), tmp)

    def ours(k: int) -> tuple[float, dict]:
        t0 = time.perf_counter()
        run_benchmarks(model, [BENCHMARKS.get("gsm8k")], tmp / f"reasonrl{k}", data_dir=tmp, device=args.device,
                       overrides={"n": 1, "temperature": 0.0, "max_new_tokens": args.max_tokens},
                       chunk_size=args.batch, log=lambda *a: None)  # fmt: skip
        seconds = time.perf_counter() - t0
        # where reasonrl's time went (its own timing.json): generating, waiting for the verifiers, the rest
        timing = json.loads((tmp / f"reasonrl{k}" / "timing.json").read_text())
        return seconds, {k: timing[k] for k in ("total_s", "generate_s", "score_wait_s", "other_s", "score_s",
                                                "verifier_ready_s")}  # fmt: skip

    def raw_engine() -> float:
        t0 = time.perf_counter()  # like the others: loading the model counts
        policy, tok = load_policy(model, device=args.device, log=lambda *a: None)
        engine = HFRolloutEngine(policy, tok, max_batch=args.batch)
        ids = encode_prompts(tok, problems)
        for start in range(0, len(ids), args.batch):
            engine.generate(ids[start : start + args.batch], SamplingParams.greedy(args.max_tokens))
        return time.perf_counter() - t0

    # alternating, so that a slow spell of the machine falls on both sides; medians reported
    ours_s, raw_s, timings = [], [], []
    for k in range(args.repeats):
        seconds, timing = ours(k)
        ours_s.append(seconds)
        timings.append(timing)
        raw_s.append(raw_engine())
    mid = sorted(range(args.repeats), key=lambda k: ours_s[k])[args.repeats // 2]
    report["reasonrl_samples_per_s"] = round(args.problems / statistics.median(ours_s), 2)
    report["reasonrl_seconds"] = timings[mid]  # the median run's
    report["raw_engine_samples_per_s"] = round(args.problems / statistics.median(raw_s), 2)
    report["reasonrl_vs_raw_engine_each"] = [round(r / o, 3) for o, r in zip(ours_s, raw_s)]

    try:
        from lm_eval import simple_evaluate
        from lm_eval.tasks import TaskManager
    except ImportError:
        report["lm_eval_samples_per_s"] = None
    else:
        tasks = tmp / "tasks"
        tasks.mkdir()
        (tasks / "bench.yaml").write_text(
            LM_EVAL_TASK.format(path=tmp / "gsm8k.jsonl", max_tokens=args.max_tokens)
        )
        t0 = time.perf_counter()
        simple_evaluate(model="hf", model_args=f"pretrained={model},dtype=float32,device={args.device}",
                        tasks=["bench_gsm8k_local"], task_manager=TaskManager(include_path=str(tasks)),
                        batch_size=args.batch)  # fmt: skip
        report["lm_eval_samples_per_s"] = round(args.problems / (time.perf_counter() - t0), 2)
    r, raw, lm = (
        report["reasonrl_samples_per_s"],
        report["raw_engine_samples_per_s"],
        report["lm_eval_samples_per_s"],
    )
    report["reasonrl_vs_lm_eval"] = round(r / lm, 3) if lm else None
    report["reasonrl_vs_raw_engine"] = round(r / raw, 3)
    print(
        f"reasonrl eval {r} samples/s | raw engine {raw} | lm-eval {lm} (medians of {args.repeats}; ratio to the "
        f"raw engine per pair {report['reasonrl_vs_raw_engine_each']}) | verifier cold start "
        f"{report['verifier_cold_start_s']} s (before timing)"
    )
    t = report["reasonrl_seconds"]
    print(f"reasonrl: {t['total_s']:.2f} s = generating {t['generate_s']:.2f} + waiting for scoring "
          f"{t['score_wait_s']:.2f} + the rest {t['other_s']:.2f} (loading, verifier start, files); "
          f"raw engine {args.problems / raw:.2f} s (medians); scoring itself {t['score_s']:.2f} s on its thread, the "
          f"verifier workers answered {t['verifier_ready_s']:.2f} s after starting")  # fmt: skip
    print(json.dumps(report))
    return report


if __name__ == "__main__":
    main()
