"""`reasonrl plan RECIPE [overrides] [--world-size N] [--device-memory GIB] [--measure] [--json]`: what a
run will do per step and per rank, its estimated memory per device, and the mistakes visible before it
starts. Exit status 2 when a finding is an error (the same ones stop `reasonrl train`). The prompt
length planned with is the run's longest prompt, measured as train measures it, unless
`--prompt-tokens N` or `--worst-case` (data.max_prompt_tokens) says otherwise, or the data or the
tokenizer cannot be read here (then the worst case, and the report says so).

Owns: the command's arguments and the printed report. Does not own: the plan (`reasonrl.planner`).
"""

from __future__ import annotations

import json
import sys

MIB = 2**20

_MEMORY_ROWS = [
    ("weights", "weights"),
    ("gradients", "gradients"),
    ("optimizer", "optimizer state (AdamW)"),
    ("reference", "reference model (KL)"),
    ("critic", "critic (GAE)"),
    ("reward_model", "reward model (weights)"),
    ("activations_no_checkpointing", "activations, no checkpointing"),
    ("activations_checkpointing", "activations, with checkpointing"),
    ("logits", "logits [B, T, V] + log-softmax"),
    ("kv_cache", "KV cache (generation)"),
    ("training_peak", "peak, training phase"),
    ("generation_peak", "peak, generation phase"),
]


# reasonrl's attention functions in place of eager attention (`models.loading.lean_attention`)
_ATTENTION = {
    "reasonrl_softcap": "soft-capped in blocks of queries (eager's arithmetic, no scores kept; SDPA would drop the cap)",
    "reasonrl_sinks": "sinks through SDPA (one extra key; eager's arithmetic)",
}


def _size(n: float) -> str:
    return f"{n / 2**30:8.2f} GiB" if n >= 2**30 else f"{n / MIB:8.1f} MiB"


# prompts tokenized in full; above this, the 1% longest by characters (at least this many)
MEASURE_ALL = 20_000


def longest_prompt(cfg) -> int | None:
    """The longest training / validation prompt in tokens, measured as `reasonrl train` will (its data,
    the model's tokenizer and chat template; of a large set, the 1% longest in characters, so a
    million rows take seconds, not minutes: train still measures every one); None where that cannot
    be had here: a data mixture, or a tokenizer that is neither local nor cached. Bad data, or a
    prompt over data.max_prompt_tokens without data.drop_overlong_prompts, is an InputError, as for
    train."""
    if cfg.data.mixture:
        return None
    from transformers import AutoTokenizer

    from reasonrl.data.prompts import encode_prompt
    from reasonrl.errors import InputError
    from reasonrl.models.loading import resolve_model_path
    from reasonrl.trainer.setup import load_data

    train, val = load_data(cfg)
    try:
        tokenizer = AutoTokenizer.from_pretrained(resolve_model_path(cfg.model.path, log=lambda *a: None))
    except (OSError, ValueError):
        return None
    problems = train + val
    if len(problems) > MEASURE_ALL:  # the longest in tokens is among the longest in characters
        chars = lambda p: sum(len(str(m.get("content", ""))) for m in p.prompt)  # noqa: E731
        problems = sorted(problems, key=chars, reverse=True)[: max(MEASURE_ALL, len(problems) // 100)]
    budget, longest = cfg.data.max_prompt_tokens, None
    for p in problems:
        n = len(encode_prompt(tokenizer, p))
        if n > budget and not cfg.data.drop_overlong_prompts:
            raise InputError(f"prompt of uid {p.uid!r} has {n} tokens > data.max_prompt_tokens={budget}; "
                             "raise the budget or set data.drop_overlong_prompts=true")  # fmt: skip
        if n <= budget:
            longest = max(longest or 0, n)
    return longest


def report(cfg, plan, measured: dict | None = None, prompt_note: str = "") -> str:
    from reasonrl.distributed import train_engine_kind

    sh, b = plan.shape, plan.batch
    lines = [f"model {sh.name}: {sh.params / 1e6:.2f}M parameters ({sh.trainable / 1e6:.2f}M trained), "
             f"{sh.layers} layers, hidden {sh.hidden}, vocab {sh.vocab}, context {sh.context}, attention "
             + (_ATTENTION.get(sh.attention) or ("the model's own (eager; a pack runs it under a block mask)"
                if sh.own_attention else "eager" if sh.eager_attention else "SDPA")),
             f"engines: rollout {cfg.rollout.engine} {dict(cfg.rollout.engine_kwargs) or ''}".rstrip()
             + f", train {train_engine_kind(cfg.train.engine, b['world_size'])}",
             f"prompt: {prompt_note}", "", f"batch (world size {b['world_size']}):"]  # fmt: skip
    for k, v in b.items():
        if k != "world_size":
            lines.append(f"  {k.replace('_', ' '):44s} {v:>10,}")
    ckpt = "on" if cfg.model.gradient_checkpointing else "off"
    avail = f"{plan.device_memory / 2**30:.1f} GiB" if plan.device_memory else "unknown"
    lines += ["", f"memory per device (estimate; {cfg.model.dtype}, {plan.device} with {avail}, "
              f"micro-batch {_micro(cfg, b)}, checkpointing {ckpt}):"]  # fmt: skip
    for key, label in _MEMORY_ROWS:
        if plan.memory.get(key) or key.endswith("peak"):
            lines.append(f"  {label:44s} {_size(plan.memory[key])}")
    if measured:
        est, got = plan.memory["training_peak"], measured["peak"]
        lines.append(
            f"  {'measured peak of one training micro-batch':44s} {_size(got)}  (estimate / measured {est / got:.2f})"
        )
    lines += ["", "findings:" if plan.findings else "findings: none"]
    lines += [f"  {f}" for f in plan.findings]
    return "\n".join(lines)


def _plan(args) -> int:
    from reasonrl.config import load_cli
    from reasonrl.errors import InputError
    from reasonrl.planner.checks import make_plan

    cfg = load_cli(args.recipe, args.overrides)
    from reasonrl.cli.evaluate import check_counts

    check_counts(args, ("world_size", "prompt_tokens"))
    if args.device_memory is not None and not 0 < args.device_memory < float("inf"):
        raise InputError(f"--device-memory must be a finite number > 0 (GiB), got {args.device_memory}")
    mem = args.device_memory * 2**30 if args.device_memory else None
    prompt = args.prompt_tokens
    if prompt is not None:
        note = f"{prompt} tokens (--prompt-tokens)"
    elif args.worst_case or (prompt := longest_prompt(cfg)) is None:
        note = f"{cfg.data.max_prompt_tokens} tokens (data.max_prompt_tokens, the worst case)"
    else:
        note = f"{prompt} tokens (the longest training / validation prompt)"
    plan = make_plan(cfg, world=args.world_size, memory_bytes=mem, prompt_tokens=prompt)
    used = prompt if prompt is not None else cfg.data.max_prompt_tokens
    measured = None
    if args.measure:
        from reasonrl.planner.measure import measure_train_step

        device = "cuda" if plan.device == "cuda" else "cpu"
        measured = measure_train_step(cfg, used, device)
    if args.json:
        print(json.dumps({"model": vars(plan.shape), "prompt_tokens": used,
                          "batch": plan.batch, "memory": plan.memory,
                          "device": plan.device, "device_memory": plan.device_memory, "measured": measured,
                          "findings": [vars(f) for f in plan.findings]}))  # fmt: skip
    else:
        print(report(cfg, plan, measured, note))
    if plan.errors:
        print(f"reasonrl: plan: {len(plan.errors)} error(s); `reasonrl train` would stop", file=sys.stderr)
        return 2
    return 0


def add_plan_parser(sub) -> None:
    p = sub.add_parser(
        "plan", help="batch arithmetic, estimated memory per device and config mistakes, before a run"
    )
    from reasonrl.cli.main import recipe_help

    p.add_argument("recipe", nargs="?", default=None, help=recipe_help())
    p.add_argument("overrides", nargs="*", help="dotted overrides, as for train")
    p.add_argument("--world-size", type=int, default=None, help="ranks to plan for (default: this launch's)")
    p.add_argument("--device-memory", type=float, default=None, metavar="GIB",
                   help="memory per device to check against (default: this machine's GPU, else its RAM)")  # fmt: skip
    p.add_argument("--prompt-tokens", type=int, default=None,
                   help="longest prompt in tokens (default: measured on the run's data with its tokenizer)")  # fmt: skip
    p.add_argument("--worst-case", action="store_true",
                   help="plan with data.max_prompt_tokens as the prompt length, without reading the data")  # fmt: skip
    p.add_argument("--measure", action="store_true",
                   help="also run one training micro-batch with random weights here and report its peak")  # fmt: skip
    p.add_argument("--json", action="store_true", help="one JSON object instead of the report")
    p.set_defaults(fn=_plan)


def _micro(cfg, b: dict) -> str:
    from reasonrl.planner.checks import micro_rows

    rows = micro_rows(cfg, b["max_tokens_per_step"] // b["sequences_per_step"])
    return (
        f"{rows} rows of the longest (train.micro_tokens {cfg.train.micro_tokens})"
        if cfg.train.micro_tokens
        else str(rows)
    )
