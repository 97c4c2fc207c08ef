"""Building everything a run needs from its config, once, at the edge (rule 6).

Owns: `Run` (model, tokenizer, rollout and train engines, data, sampler, reward scorer), data loading
with load-time routing checks, per-step seeds, and held-out validation. Does not own: the step
itself (`trainer.loop`), checkpoint I/O (`engines.checkpoint`) or parsing config (`config`).
"""

from __future__ import annotations

import copy
import hashlib
import math
import random
from dataclasses import dataclass, field

import torch

from reasonrl.config import ConfigError, RunConfig, import_plugins
from reasonrl.data.mixture import build_sampler
from reasonrl.data.prompts import fit_prompts, with_prompt_key, with_template_kwargs
from reasonrl.data.sampler import PromptSampler
from reasonrl.data.schema import load_problems
from reasonrl.data.tasks import generate
from reasonrl.distributed import is_main
from reasonrl.engines.single import SingleDeviceEngine, training_forward
from reasonrl.errors import InputError
from reasonrl.eval.accuracy import evaluate
from reasonrl.models.loading import disable_dropout, load_model, load_tokenizer_and_config, resolve_device
from reasonrl.rewards import check_routable
from reasonrl.rewards.health import failed_share, failure_warning
from reasonrl.rewards.routing import with_verifier
from reasonrl.rewards.services import check_services, prepare_terms
from reasonrl.rewards.verifiers.unverified import checkable
from reasonrl.rollout.agents import check_agent_rows
from reasonrl.rollout.base import SamplingParams
from reasonrl.rollout.environments import check_rows
from reasonrl.rollout.factory import build_rollout_engine, check_available
from reasonrl.rollout.interaction import make_interaction
from reasonrl.types import Problem


def step_seed(seed: int, step: int) -> int:
    """A seed that depends only on (run seed, step): resumed runs sample exactly the same."""
    return int.from_bytes(hashlib.sha256(f"{seed}:{step}".encode()).digest()[:6], "little")


def _check_data_files(d) -> None:
    """Every listed data file exists, named by its key, before any is read (before: "data file not
    found: x.parquet", which of train, validation or a mixture's files left to guess)."""
    from pathlib import Path

    listed = [
        (f"data.{k}[{i}]", p) for k in ("train_files", "val_files") for i, p in enumerate(getattr(d, k))
    ]
    listed += [(f"data.mixture[{i}].files[{j}]", p) for i, m in enumerate(d.mixture)
               for j, p in enumerate(m.get("files") or [])]  # fmt: skip
    for key, path in listed:
        if not str(path).startswith("hf:") and not Path(path).exists():
            raise InputError(f"{key}: data file not found: {path}")


def load_data(cfg: RunConfig) -> tuple[list[Problem], list[Problem]]:
    d = cfg.data
    _check_data_files(d)

    def files(paths: list[str]) -> list[Problem]:  # rows of data files, to reward.verifier where it is set
        return with_verifier(load_problems(paths), cfg.reward.verifier) if paths else []

    if d.mixture:  # each source loads and checks its own data (data.mixture.build_sampler)
        train, val = [], files(d.val_files)
        task = next((m["task"] for m in d.mixture if m.get("task")), None)
        if not val and task:
            val = generate(task, d.val_size, seed=d.seed + 1, difficulty=d.difficulty, split="test")
    elif d.train_files:
        train, val = files(d.train_files), files(d.val_files)
    else:  # a built-in task; its test split validates unless data.val_files says otherwise
        train = generate(d.task, d.train_size, seed=d.seed, difficulty=d.difficulty, split="train")
        if d.val_files:
            val = files(d.val_files)
        else:
            val = generate(d.task, d.val_size, seed=d.seed + 1, difficulty=d.difficulty, split="test")
    kwargs = dict(d.chat_template_kwargs)  # every prompt rendered with them (a row's own win)
    train, val = with_template_kwargs(train, kwargs), with_template_kwargs(val, kwargs)
    # data.prompt_key: each row's prompt from another of its fields (verl SFT's prompt_key)
    train, val = (
        with_prompt_key(train, d.prompt_key, "train data"),
        with_prompt_key(val, d.prompt_key, "validation data"),
    )
    options = {k: dict(v) for k, v in cfg.reward.options.items()}
    sft = cfg.algo.objective == "sft"  # rows with no checkable answer train SFT (validation: eval/nll)
    vote = cfg.reward.pseudo_label.enabled  # labels voted by the samples: rows may have none (not val's)
    check_routable(train, "train data", options, unverified=sft, vote=vote)
    check_routable(val, "validation data", options, unverified=sft)
    for rows, where in (
        (train, "train data"),
        (val, "validation data"),
    ):  # rollout.tools.environment's and rollout.agent's episodes
        check_rows(rows, where, cfg.rollout)
    check_agent_rows(cfg, train, "train data")  # (validation's accuracy: its verifiers', whatever the agent)
    return train, val[: cfg.val.size]


def lora_targets(model, names: list[str]) -> str | list[str]:
    """What peft gets for `model.lora.target_modules`: "all-linear" (a multimodal model: its language
    model's linear layers by full name, `language_linears`), or the names, each of which must name a
    linear layer of the model (a name that matches none is a ConfigError listing the model's linear layers:
    peft would adapt the others without a word, e.g. only o_proj and down_proj of Phi-3 for the Llama
    names, or fail with its own error when none matches)."""
    import torch

    if names == ["all-linear"]:
        return language_linears(model) or "all-linear"
    linear = {n.rsplit(".", 1)[-1] for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)}
    missing = [n for n in names if n not in linear]
    if missing or not names:
        raise ConfigError(f"model.lora.target_modules: {missing or names} name no linear layer of "
                          f"{type(model).__name__} (its linear layers: {sorted(linear)}); list some of those, "
                          "or [all-linear]")  # fmt: skip
    return names


def language_linears(model) -> list[str] | None:
    """The full names of a multimodal model's language-model linear layers, where linear layers other
    than the output head lie outside its decoder (a vision tower, a projector: "all-linear" would put
    adapters there that text prompts never train); None where the decoder holds them all."""
    from reasonrl.engines.output_head import decoder
    from reasonrl.models.loading import unwrapped

    base = unwrapped(model)
    inside = {id(m) for m in decoder(base).modules()}
    head = base.get_output_embeddings()
    linear = [(n, m) for n, m in base.named_modules() if isinstance(m, torch.nn.Linear) and m is not head]
    if all(id(m) in inside for _, m in linear):
        return None
    return [n for n, m in linear if id(m) in inside]


_LORA_NEEDS_PEFT = "model.lora.rank > 0 needs the optional package peft: pip install 'reasonrl[peft]'"


def _check_extras(cfg: RunConfig) -> None:
    import importlib.util

    check_available(cfg.rollout.engine)
    if cfg.model.lora.rank > 0 and importlib.util.find_spec("peft") is None:
        raise ConfigError(_LORA_NEEDS_PEFT)


def add_lora(model, spec):
    """The policy with LoRA adapters (peft): only the adapters train; the base weights stay as loaded."""
    try:
        from peft import LoraConfig, get_peft_model
    except ImportError:  # installed but broken (a missing one is refused before the weights load)
        raise ConfigError(_LORA_NEEDS_PEFT) from None
    cfg = LoraConfig(r=spec.rank, lora_alpha=spec.alpha, lora_dropout=spec.dropout,
                     target_modules=lora_targets(model, list(spec.target_modules)), task_type="CAUSAL_LM")  # fmt: skip
    if getattr(model, "is_gradient_checkpointing", False):
        model.enable_input_require_grads()  # frozen embeddings: checkpointed blocks still get gradients
    try:
        return get_peft_model(model, cfg)
    except ValueError as e:  # e.g. Mamba's out_proj, which peft will not adapt (all-linear includes it)
        raise ConfigError(f"model.lora.target_modules: peft refuses them for {type(model).__name__}: "
                          f"{str(e).splitlines()[0]}; list the layers to adapt") from None  # fmt: skip


def check_parallel(cfg: RunConfig) -> str:
    """The train engine for this launch ("single" or "fsdp2"), and the settings several ranks need;
    a ConfigError naming the key otherwise."""
    from reasonrl import distributed as dist
    from reasonrl.rollout.factory import ROLLOUT_ENGINES

    world, t = dist.world_size(), cfg.train
    kind = dist.train_engine_kind(t.engine, world)
    if world > 1 and kind != "fsdp2":
        raise ConfigError(f"train.engine={t.engine} runs on one process; under torchrun use fsdp2 (or auto)")
    if kind == "fsdp2" and world == 1 and not dist.active():
        raise ConfigError("train.engine=fsdp2 needs a process group: launch with torchrun --nproc-per-node N")
    tp = int(dict(cfg.rollout.engine_kwargs).get("tensor_parallel_size", 1))
    if tp > 1 and (world == 1 or world % tp):
        raise ConfigError(f"rollout.engine_kwargs.tensor_parallel_size={tp} needs a multiple of that many torchrun "
                          f"ranks (this run has {world}): each group of {tp} consecutive ranks shares an engine")  # fmt: skip
    if world > 1:
        from reasonrl.planner.checks import rank_split

        if (split := rank_split(cfg, world)) is not None:
            raise ConfigError(split[1])
        if not getattr(ROLLOUT_ENGINES.get(cfg.rollout.engine), "data_parallel", False):
            raise ConfigError(f"with several ranks, rollout.engine={cfg.rollout.engine} (an engine without "
                              "data_parallel) is not supported yet")  # fmt: skip
        if tp > 1 and cfg.rollout.max_staleness:
            raise ConfigError(f"rollout.engine_kwargs.tensor_parallel_size={tp} with rollout.max_staleness > 0 "
                              "and several ranks is not supported: each rank's rollout worker has its own engine")  # fmt: skip
    return kind


@dataclass
class Run:
    model: object
    tokenizer: object
    rollout_engine: object
    train_engine: SingleDeviceEngine
    scorer: object
    sampler: PromptSampler
    train: list[Problem]
    val: list[Problem]
    max_prompt_tokens: int
    think_from_prompt: bool = True
    closers: list = field(default_factory=list)
    replay_rollouts: list | None = None  # an async checkpoint's batches asked for and not yet trained on
    benchmarks: list = field(default_factory=list)  # [(Benchmark, problems)] for val.benchmarks
    best: dict | None = None  # checkpoint.keep_best: {metric, step, value} of the best validation so far
    entropy_control: object = None  # trainer.entropy_control.EntropyControl, set by the training loop
    kl_control: object = None  # trainer.kl_control.KLControl, set by the training loop
    interaction: object = (
        None  # rollout.interaction.Interaction: feedback between attempts (rollout.interaction)
    )
    pseudo_label: object = None  # config.PseudoLabelConfig where the samples vote their labels

    @property
    def pad_id(self) -> int:
        return self.tokenizer.pad_token_id

    def close(self) -> None:
        for c in self.closers:
            c()


def preflight(cfg: RunConfig, longest_prompt: int | None, model_config=None, log=print) -> None:
    """`reasonrl plan`'s checks with the real longest prompt (and the loaded model's config, so nothing
    is read again): errors stop the run, warnings are logged."""
    from reasonrl.planner.checks import make_plan
    from reasonrl.planner.shape import model_shape

    m = cfg.model
    shape = model_shape(m.path, m.lora.rank, list(m.lora.target_modules), config=model_config)
    plan = make_plan(cfg, prompt_tokens=longest_prompt, shape=shape)
    for f in plan.findings:
        if f.level == "warn":
            log(f"plan: {f}")
    if plan.errors:
        raise ConfigError("; ".join(f"{f.key}: {f.message}" for f in plan.errors))


def optimizer_updates(t) -> int:
    """The optimizer updates of a whole run (`train` section): steps x epochs x mini-batches per step."""
    return t.steps * t.epochs * (t.global_batch // t.mini_batch)


def warmup_updates(t) -> int:
    """`train.warmup_steps`, or `train.warmup_ratio` of the run's updates rounded up (as transformers'
    Trainer rounds warmup_ratio; but 0.1 of 30 is 3, not the 4 that 0.1 * 30 = 3.0000000000000004 gives)."""
    return t.warmup_steps or math.ceil(round(t.warmup_ratio * optimizer_updates(t), 9))


def build_run(cfg: RunConfig, log=print) -> Run:
    import_plugins(cfg.plugins)  # (plugins may register the engines named)
    # settings this launch cannot run, the data (files of a mixture and of val.benchmarks too), the
    # prompts' lengths and the planner's checks: all before the weights load (minutes for a large
    # model), so that a mistake costs seconds
    kind = check_parallel(cfg)
    resolve_device(cfg.model.device)  # model.device=cuda on a machine without one
    _check_extras(cfg)  # the optional packages the settings need (vLLM, peft)
    if cfg.log.wandb and is_main():  # online logging: an API key and the server within reach
        from reasonrl.trainer.wandb_log import check_online

        check_online(cfg.log.wandb_mode)
    random.seed(cfg.train.seed)
    torch.manual_seed(cfg.train.seed)
    train, val = load_data(cfg)
    from reasonrl.trainer.sft import check_row_responses, check_unverified

    check_row_responses(
        cfg, train, "train data"
    )  # SFT's responses / guidance's demonstrations, before any load
    if cfg.algo.objective == "sft":
        check_unverified(cfg, val, log)
    path, tokenizer, config = load_tokenizer_and_config(cfg.model.path, log=log)
    budget, drop = cfg.data.max_prompt_tokens, cfg.data.drop_overlong_prompts
    seen: dict = {}
    train = fit_prompts(tokenizer, train, budget, "train data", drop, log, stats=seen)
    fitting_val = fit_prompts(tokenizer, val, budget, "validation data", drop, log, stats=seen)
    if not train and not cfg.data.mixture:
        raise InputError(f"no training prompt fits data.max_prompt_tokens={budget}")
    if val and not fitting_val:  # validation would be skipped without a word (and keep_best never met)
        raise InputError(f"no validation prompt fits data.max_prompt_tokens={budget}")
    val = fitting_val
    # the planner's checks, on a copy (building its meta model sets the attention on the config it gets)
    preflight(cfg, None if cfg.data.mixture else seen.get("longest"), copy.deepcopy(config), log)
    options = {k: dict(v) for k, v in cfg.reward.options.items()}  # (a mixture's files load here)
    sampler = build_sampler(cfg.data, cfg.train.global_batch // cfg.rollout.n, train, tokenizer, options, log,
                            cfg.reward.verifier, unverified=cfg.algo.objective == "sft",
                            vote=cfg.reward.pseudo_label.enabled)  # fmt: skip
    benchmarks = load_val_benchmarks(cfg, tokenizer, log, train)  # val.benchmarks: files, rows, routing
    # the verifiers' network services (an LLM judge, SandboxFusion) up, or waited for, before the weights load
    # (a mixture's files load in build_sampler; without one, its sources hold `train` itself: not twice)
    mixed = [p for src in sampler.sources for p in getattr(src, "problems", ())] if cfg.data.mixture else []
    check_row_responses(cfg, mixed, "data.mixture")  # a mixture's files: their rows' responses too
    check_services([*train, *val, *mixed, *(p for _, ps in benchmarks for p in ps)], options,
                   cfg.reward.service_wait_s, log)  # fmt: skip
    # a reward model loads before the policy (kept only where this process scores the training steps)
    for line in prepare_terms(dict(cfg.reward.weights), options, keep=cfg.rollout.max_staleness == 0):
        log(line)
    if cfg.rollout.tools.enabled:  # the tools' sandbox runs a program, or the run stops here
        from reasonrl.rollout.tool_checks import probe_tools

        log(probe_tools(cfg.rollout.tools))
    interaction = make_interaction(cfg, tokenizer)  # its turn from the chat template, or the run stops here
    model = load_model(path, config, tokenizer, cfg.model.dtype, cfg.model.device, log=log)
    if cfg.model.disable_dropout and (off := disable_dropout(model)):  # before the reference copy and LoRA
        log(f"model.disable_dropout: {off} dropout rate(s) above 0 set to 0 for training")
    if cfg.model.logprob_chunk > 0:  # before LoRA, compiling or sharding: the model as loaded
        from reasonrl.engines.output_head import check_output_head

        check_output_head(model)
    if cfg.model.pack_tokens > 0:
        from reasonrl.engines.packing import check_packing

        check_packing(model)
    if cfg.model.gradient_checkpointing:
        model.gradient_checkpointing_enable()
    ref = None
    if cfg.algo.kl.coef > 0:
        ref = copy.deepcopy(model).eval().requires_grad_(False)
    if cfg.model.lora.rank > 0:
        model = add_lora(model, cfg.model.lora)
    if cfg.model.compile:
        from reasonrl.engines.compiled import compile_decoder_layers

        log(f"model.compile: {compile_decoder_layers(model)} decoder layers compiled for training")
    t = cfg.train
    kw = dict(lr=t.lr, weight_decay=t.weight_decay, betas=tuple(t.betas), warmup_steps=warmup_updates(t),
              lr_schedule=t.lr_schedule, total_steps=optimizer_updates(t),
              min_lr_ratio=t.min_lr_ratio, grad_clip=t.grad_clip, bf16=cfg.model.dtype == "bfloat16", ref_model=ref)  # fmt: skip
    # (SFT: the model's own distribution, not the sampling temperature's)
    temperature = 1.0 if cfg.algo.objective == "sft" else cfg.rollout.temperature
    if (forward := training_forward(cfg.model, temperature)) is not None:
        kw["forward"] = forward
    if kind == "fsdp2":
        from reasonrl.engines.fsdp2 import FSDP2Engine

        engine = FSDP2Engine(model, cpu_offload=t.cpu_offload, **kw)
    else:
        engine = SingleDeviceEngine(model, **kw)
    from reasonrl.trainer.rollouts import make_scorer

    scorer = make_scorer(cfg, train)
    run = Run(
        model,
        tokenizer,
        build_rollout_engine(
            cfg.rollout.engine,
            model,
            tokenizer,
            cfg.rollout.engine_kwargs,
            cfg.rollout.tools,
            dict(cfg.data.chat_template_kwargs),
            cfg.rollout.agent,
        ),  # fmt: skip
        engine,
        scorer,
        sampler,
        train,
        val,
        cfg.data.max_prompt_tokens,
        think_from_prompt=cfg.reward.think_from_prompt,
    )
    run.benchmarks = benchmarks
    run.interaction = interaction
    run.pseudo_label = cfg.reward.pseudo_label if cfg.reward.pseudo_label.enabled else None
    if hasattr(scorer, "close"):
        run.closers.append(scorer.close)
    run.closers.append(run.rollout_engine.close)
    if interaction is not None:  # (verl's interaction classes' processes)
        run.closers.append(interaction.close)
    return run


def load_val_benchmarks(cfg: RunConfig, tokenizer, log=print, train: list[Problem] = ()) -> list:
    """val.benchmarks loaded (and checked: files, rows, routing) before training starts; a warning
    for each benchmark whose problems the training data holds (`data.dedup.benchmark_overlap`)."""
    if not cfg.val.benchmarks:
        return []
    from reasonrl.eval.benchmarks import load_benchmark, resolve

    out = []
    for b in resolve(list(cfg.val.benchmarks)):
        problems = load_benchmark(b, cfg.val.data_dir, limit=cfg.val.benchmark_limit, dir_key="val.data_dir")
        problems = with_template_kwargs(problems, dict(cfg.data.chat_template_kwargs))
        check_routable(
            problems, f"val benchmark {b.name}", {k: dict(v) for k, v in cfg.reward.options.items()}
        )
        problems = fit_prompts(tokenizer, problems, cfg.data.max_prompt_tokens, f"val benchmark {b.name}",
                               cfg.data.drop_overlong_prompts, log)  # fmt: skip
        if not problems:
            raise InputError(
                f"val benchmark {b.name}: no prompt fits data.max_prompt_tokens={cfg.data.max_prompt_tokens}"
            )
        out.append((b, problems))
    if train:
        from reasonrl.data.dedup import benchmark_overlap

        for name, found in benchmark_overlap(list(train), [(b.name, ps) for b, ps in out]).items():
            log(f"warning: {len(found)} training prompts overlap val benchmark {name} (e.g. train row "
                f"{found[0].index}: {found[0].detail}); `reasonrl data decontaminate --benchmarks {name}` "
                "removes them")  # fmt: skip
    return out


def validate_policy(run: Run, cfg: RunConfig, step: int = 0, log=None) -> dict[str, float]:
    """Greedy accuracy and mean@n on the held-out problems (fixed seed, so reruns agree), with the share of
    samples whose verifier failed or timed out; `log` gets one warning per validation the verifier failed in
    (those samples count as wrong, so the accuracy is a lower bound, not the model's)."""
    if not run.val and not run.benchmarks:
        return {}
    run.rollout_engine.wake()
    try:
        out = _validate(run, cfg, f"step {step}: validation", log or (lambda *a: None))
    finally:
        run.rollout_engine.sleep()
    if cfg.algo.objective == "sft":  # the validation rows' own responses: their NLL under the policy
        from reasonrl.trainer.sft import validation_nll

        out.update(validation_nll(run, cfg, run.val))
    return out


def _validate(run: Run, cfg: RunConfig, what: str, log) -> dict[str, float]:
    v = cfg.val
    greedy = SamplingParams.greedy(cfg.rollout.max_new_tokens)
    think = run.think_from_prompt
    out: dict[str, float] = {}
    # validation reports correctness: the routed verifiers alone (a reward model's forwards would be wasted)
    scorer = run.scorer.correctness_only() if hasattr(run.scorer, "correctness_only") else run.scorer
    if run.benchmarks:
        from reasonrl.eval.runner import benchmark_metrics

        out.update(benchmark_metrics(run.rollout_engine, run.tokenizer, scorer, run.benchmarks,
                                     cfg.rollout.max_new_tokens, cfg.train.seed, think, log=log, what=what))  # fmt: skip
    scored = checkable(
        run.val
    )  # rows with no checkable answer (SFT data) give eval/nll alone (`validate_policy`)
    if not scored:
        return out
    runs = {"eval/accuracy": greedy}
    if v.n > 1:  # the rollout's own filters (top-p, top-k, min-p) at the validation temperature, unless
        filters = {k: x for k, x in (("top_p", v.top_p), ("top_k", v.top_k)) if x is not None}  # val's own
        runs[f"eval/mean@{v.n}"] = SamplingParams.of_rollout(cfg.rollout, cfg.train.seed, n=v.n,
                                                              temperature=v.temperature, **filters)  # fmt: skip
    reasons = []
    for name, params in runs.items():
        ev = evaluate(run.rollout_engine, run.tokenizer, scored, params, batch_size=v.batch_size,
                      think_from_prompt=think, scorer=scorer)  # fmt: skip
        out[name] = ev.accuracy
        reasons += ev.reasons
        warning = failure_warning(f"{what} ({name})", ev.reasons)
        if warning:
            log(warning)
    out["eval/verifier_errors"] = failed_share(reasons)
    return out
