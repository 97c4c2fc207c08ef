"""Run configuration: section dataclasses composed into `RunConfig`, loaded from a YAML recipe plus
dotted command-line overrides (`algo.clip_high=0.28`), type-checked by OmegaConf structured configs.

Owns: the schema, defaults, loading and cross-field validation. Library code receives its own
section or plain arguments, never the whole config (rule 6). Errors name the key and valid choices.
Does not own: the registries whose names and keyword options it checks (`algorithms`, `rewards`), or
building the run from the config (`trainer.setup`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from omegaconf import MISSING, DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from reasonrl.data.curriculum import CurriculumConfig
from reasonrl.errors import InputError
from reasonrl.trainer.watchdog import WatchdogConfig


class ConfigError(InputError):
    """A recipe or override is invalid; the message names the key."""


@dataclass
class LoraSpec:
    rank: int = 0  # > 0: train LoRA adapters of this rank (peft) instead of all weights
    alpha: float = 16.0
    dropout: float = 0.0
    target_modules: list[str] = field(
        default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    )


@dataclass
class ModelConfig:
    path: str = "demo"  # "demo" = the tiny bootstrapped model; else any HF directory or hub id
    dtype: str = "float32"  # float32 | bfloat16 (bf16 only on CUDA)
    device: str = "auto"  # auto | cpu | cuda
    gradient_checkpointing: bool = False
    # > 0: log-probs and entropy from the last hidden states, this many positions at a time (the
    # [B, T, V] logits never exist at once; recomputed in backward); 0: from the full logits
    logprob_chunk: int = 0
    pack_tokens: int = (
        0  # > 0: the training forward packs rows into sequences of this many tokens (no padding)
    )
    lora: LoraSpec = field(default_factory=LoraSpec)


@dataclass
class DataConfig:
    task: str = "arithmetic"  # a built-in procedural task, used when train_files is empty
    difficulty: int = 2
    train_size: int = 20000
    val_size: int = 200
    train_files: list[str] = field(default_factory=list)  # parquet / jsonl in verl format
    val_files: list[str] = field(default_factory=list)
    max_prompt_tokens: int = 512
    drop_overlong_prompts: bool = False  # False: a prompt over max_prompt_tokens is a load-time error
    shuffle: bool = True
    seed: int = 0
    # several sources with weights (docs/data.md): [{name, weight, files: [...]} | {name, weight, task,
    # difficulty} | {name, weight, reasoning_gym: 'a:2,b:1', config: [...]}]; replaces train_files / task
    mixture: list[dict[str, Any]] = field(default_factory=list)
    curriculum: CurriculumConfig = field(default_factory=CurriculumConfig)


@dataclass
class RolloutConfig:
    engine: str = "hf"  # a name in rollout.factory.ROLLOUT_ENGINES (hf, vllm)
    engine_kwargs: dict[str, Any] = field(
        default_factory=dict
    )  # that engine's settings, e.g. {max_batch: 256}
    n: int = 8  # samples per prompt (group size)
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    max_new_tokens: int = 64
    # 0: generate, then train (synchronous). k > 0: a rollout worker process with its own engine and
    # weights generates and scores up to k policy versions ahead while the trainer updates (needs
    # algo.tis_cap > 0: the loss corrects for the older sampling policy; see docs/rollouts.md)
    max_staleness: int = 0
    worker_threads: int = 1  # torch threads of the rollout worker (the trainer keeps the rest)
    worker_timeout_s: float = 900.0  # a worker that delivers no batch for this long is reported hung


@dataclass
class AlgoConfig:
    adv_estimator: str = "grpo"
    adv_kwargs: dict[str, Any] = field(default_factory=dict)
    policy_loss: str = "ppo_clip"
    clip_low: float | None = None  # None: the policy loss's own default (ppo_clip 0.2, gspo 3e-4, cispo 1.0)
    clip_high: float | None = None  # None: the loss's default (ppo_clip 0.2, gspo 4e-4, cispo 0.28)
    loss_kwargs: dict[str, Any] = field(default_factory=dict)  # extra options of the policy loss
    loss_agg: str = "token_mean"
    kl_coef: float = 0.0  # > 0 adds a KL(policy || reference) loss term and loads a reference model
    kl_estimator: str = "k3"
    entropy_coef: float = 0.0
    # --- reward shaping (applied to the verifier score before advantages; see docs/algorithms.md)
    kl_in_reward: bool = False  # true: fold kl_coef * KL(old || ref) into the rewards instead of the loss
    reward_map: list[float] = field(default_factory=list)  # [low, high]: r -> low + (high - low) * r
    overlong_buffer: int = 0  # DAPO soft overlong penalty over the last N tokens of max_new_tokens; 0 = off
    overlong_penalty: float = 1.0  # the penalty at (and beyond) rollout.max_new_tokens
    mask_truncated: bool = False  # DAPO overlong filtering: no loss on completions cut at max_new_tokens
    # --- DAPO dynamic sampling: drop zero-variance groups, refill with new prompts
    dynamic_sampling: bool = False
    dynamic_sampling_max_rounds: int = 3  # extra generation rounds per step; then pad (trainer.sampling)
    # --- update guards and corrections
    early_stop_ratio: float | None = None  # skip a mini-batch whose mean importance ratio exceeds this
    early_stop_kl: float | None = None  # ... or whose approx KL(old || current) exceeds this
    tis_cap: float = 0.0  # > 0: truncated IS weight min(pi_old / pi_sampler, cap) per token; 0 = off
    # --- critic (PPO with a value model; used when adv_estimator=gae)
    critic_model: str = ""  # "" = same as model.path (a value head is put on that backbone)
    critic_lr: float | None = None  # None = train.lr
    value_clip: float | None = 0.2  # PPO value clipping range; None = unclipped


@dataclass
class RewardConfig:
    workers: int = 2  # verifier worker processes (for verifiers that are not cheap and inline)
    timeout_s: float = 10.0  # per call; a stuck worker is killed and the call scores 0
    # correctness (the routed verifier) plus shaping terms by verifier name, e.g. {format_think_answer: 0.1}
    weights: dict[str, float] = field(default_factory=lambda: {"correctness": 1.0})
    options: dict[str, Any] = field(default_factory=dict)  # keyword options per verifier name
    # a prompt that opens <think> (R1-style templates): an answer left in the unclosed block scores 0
    think_from_prompt: bool = True


@dataclass
class TrainConfig:
    steps: int = 100
    global_batch: int = 128  # sequences per step = prompts per step * rollout.n
    mini_batch: int = 128  # sequences per optimizer step (global_batch / mini_batch updates per step)
    micro_batch: int = 64  # sequences per forward/backward (gradient accumulation)
    epochs: int = 1  # passes over each rollout batch
    lr: float = 1e-5
    weight_decay: float = 0.0
    betas: list[float] = field(default_factory=lambda: [0.9, 0.999])
    warmup_steps: int = 0  # optimizer steps of linear warm-up
    lr_schedule: str = "constant"  # constant | linear | cosine (decay to min_lr_ratio * lr at the end)
    min_lr_ratio: float = 0.0
    grad_clip: float = 1.0
    seed: int = 0
    # auto: fsdp2 under torchrun (WORLD_SIZE > 1), else single; global_batch and mini_batch are global
    # (split over ranks), micro_batch is per rank (docs/distributed.md)
    engine: str = "auto"
    cpu_offload: bool = False  # fsdp2: parameters and optimizer state in CPU memory
    dist_timeout_s: float = (
        1800.0  # several ranks: a collective waiting longer fails (a rank crashed / hangs)
    )


@dataclass
class ValConfig:
    every: int = 0  # 0 = only before and after training
    size: int = 200
    n: int = 1  # samples per problem for mean@n at val temperature (besides greedy accuracy)
    temperature: float = 1.0
    batch_size: int = 256
    # registered benchmarks (eval.benchmarks) run at every validation, logged as eval/<name>/<metric>,
    # with each benchmark's own n / temperature / top_p and the run's rollout.max_new_tokens
    benchmarks: list[str] = field(default_factory=list)
    data_dir: str | None = None  # where the benchmarks' files are
    benchmark_limit: int | None = None  # first N problems of each benchmark (quick checks)


@dataclass
class CheckpointConfig:
    every: int = 0  # 0 = only at the end
    keep_last: int = 2
    on_signal: bool = True  # SIGINT / SIGTERM: finish the step, save a checkpoint, exit non-zero
    # a validation metric (e.g. eval/accuracy, eval/aime24/mean@n): a validation that improves it saves
    # a checkpoint that is kept besides the last keep_last (checkpoints/best.json names it)
    keep_best: str | None = None
    best_mode: str = "max"  # max | min
    # the optimizer state written shard by shard by every rank (torch.distributed.checkpoint, dcp/);
    # resumes on any number of ranks; False: the full state gathered and written by rank 0
    sharded: bool = False


@dataclass
class LogConfig:
    run_dir: str = "runs/latest"
    rollouts_per_step: int = (
        4  # prompt groups (each with all n completions) written to rollouts.jsonl per step
    )
    tensorboard: bool = True
    progress: bool = True


@dataclass
class RunConfig:
    name: str = "run"
    # modules imported first in every process of the run (trainer, rollout worker, verifier workers):
    # registrations of your own verifiers, rollout engines, advantage estimators or losses
    plugins: list[str] = field(default_factory=list)
    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    algo: AlgoConfig = field(default_factory=AlgoConfig)
    reward: RewardConfig = field(default_factory=RewardConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    val: ValConfig = field(default_factory=ValConfig)
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)
    log: LogConfig = field(default_factory=LogConfig)
    watchdog: WatchdogConfig = field(default_factory=WatchdogConfig)  # per-phase deadlines (s; 0 = off)


_ = MISSING  # re-exported for recipes that want required fields


def _fail(e: OmegaConfBaseException, source: str) -> ConfigError:
    key = getattr(e, "full_key", None) or ""
    msg = str(e).split("\n")[0]
    if not key:  # a merge error on a whole section names only its class, e.g. "... of TrainConfig"
        for f in fields(RunConfig):
            if isinstance(f.default_factory, type) and f.default_factory.__name__ in msg:
                key = f.name
    return ConfigError(f"{source}: invalid config key '{key}': {msg}")


def load_config(recipe: str | Path | None = None, overrides: list[str] | None = None) -> RunConfig:
    """Defaults <- YAML recipe <- dotted overrides, then `validate`. Returns a typed RunConfig object."""
    cfg = OmegaConf.structured(RunConfig)
    if recipe is not None and not Path(recipe).is_file():
        raise ConfigError(f"recipe file not found: {recipe}")
    if recipe is not None:
        _check_recipe_shape(Path(recipe))
    if overrides:
        bad = [o for o in overrides if "=" not in o]
        if bad:
            raise ConfigError(f"override {bad[0]!r} must look like section.key=value")
    source = str(recipe)
    try:
        if recipe is not None:
            cfg = OmegaConf.merge(cfg, OmegaConf.load(Path(recipe)))
        source = "command-line override"
        if overrides:
            cfg = OmegaConf.merge(cfg, OmegaConf.from_dotlist(list(overrides)))
    except OmegaConfBaseException as e:
        raise _fail(e, source) from None
    run: RunConfig = OmegaConf.to_object(cfg)  # type: ignore[assignment]
    validate(run)
    return run


def _check_recipe_shape(path: Path) -> None:
    """A recipe must be valid YAML whose top level is a mapping of sections."""
    import yaml

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not a UTF-8 text file") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"{path}{where}: not valid YAML ({getattr(e, 'problem', None) or e})") from None
    if data is not None and not isinstance(data, dict):
        raise ConfigError(
            f"{path}: a recipe must be a mapping of sections (model:, train:, ...), got {type(data).__name__}"
        )


def _non_finite(d: dict, prefix: str = "") -> str | None:
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            bad = _non_finite(v, key + ".")
            if bad:
                return bad
        elif isinstance(v, float) and not math.isfinite(v):
            return f"{key}={v}"
    return None


def to_yaml(cfg: RunConfig | DictConfig) -> str:
    return OmegaConf.to_yaml(OmegaConf.structured(cfg))


def to_dict(cfg: RunConfig) -> dict[str, Any]:
    return OmegaConf.to_container(OmegaConf.structured(cfg), resolve=True)  # type: ignore[return-value]


def from_dict(d: dict[str, Any]) -> RunConfig:
    return OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(RunConfig), d))  # type: ignore[return-value]


def _choice(key: str, value: str, choices: list[str] | tuple[str, ...]) -> None:
    if value not in choices:
        raise ConfigError(f"{key}={value!r} is not a valid choice; valid: {', '.join(choices)}")


def import_plugins(modules: list[str]) -> None:
    """Import the recipe's `plugins` (their registrations take effect); a missing one is a ConfigError."""
    import importlib

    for m in modules:
        try:
            importlib.import_module(m)
        except ImportError as e:
            raise ConfigError(f"plugins: cannot import {m!r} ({e})") from None


def validate(cfg: RunConfig) -> None:
    """Cross-field checks that a type system cannot express. Raises ConfigError naming the key."""
    from reasonrl.algorithms import ADVANTAGES, POLICY_LOSSES
    from reasonrl.algorithms.kl import KL_ESTIMATORS
    from reasonrl.algorithms.masked import AGG_MODES
    from reasonrl.data.tasks import TASKS
    from reasonrl.registry import RegistryError

    t, r, a = cfg.train, cfg.rollout, cfg.algo
    bad = _non_finite(to_dict(cfg))
    if bad:
        raise ConfigError(f"{bad} is not a finite number")
    import_plugins(cfg.plugins)
    from reasonrl.rollout.factory import ROLLOUT_ENGINES

    _choice("rollout.engine", r.engine, ROLLOUT_ENGINES.names())
    _choice("model.dtype", cfg.model.dtype, ("float32", "bfloat16", "float16"))
    _choice("model.device", cfg.model.device, ("auto", "cpu", "cuda"))
    _choice("algo.loss_agg", a.loss_agg, AGG_MODES)
    _choice("train.lr_schedule", t.lr_schedule, ("constant", "linear", "cosine"))
    _choice("train.engine", t.engine, ("auto", "single", "fsdp2"))
    for k, v in vars(cfg.watchdog).items():
        if v < 0:
            raise ConfigError(f"watchdog.{k} must be >= 0 (0 turns that phase's watchdog off), got {v}")
    if cfg.model.lora.rank < 0 or cfg.model.lora.alpha <= 0 or not 0 <= cfg.model.lora.dropout < 1:
        raise ConfigError("model.lora: rank must be >= 0, alpha > 0 and dropout in [0, 1)")
    if cfg.model.pack_tokens < 0 or (cfg.model.pack_tokens and cfg.model.logprob_chunk):
        raise ConfigError(
            "model.pack_tokens must be >= 0, and cannot be combined with model.logprob_chunk yet"
        )
    if cfg.model.logprob_chunk < 0:
        raise ConfigError(f"model.logprob_chunk must be >= 0, got {cfg.model.logprob_chunk}")
    if not 0.0 <= t.min_lr_ratio <= 1.0:
        raise ConfigError(f"train.min_lr_ratio must be in [0, 1], got {t.min_lr_ratio}")
    _choice("algo.kl_estimator", a.kl_estimator, KL_ESTIMATORS)
    _choice("algo.adv_estimator", a.adv_estimator, ADVANTAGES.names())
    _choice("algo.policy_loss", a.policy_loss, POLICY_LOSSES.names())
    if not cfg.data.train_files and not cfg.data.mixture:
        _choice("data.task", cfg.data.task, sorted(TASKS))
    from reasonrl.data.mixture import check_data_config

    check_data_config(cfg.data)
    try:
        ROLLOUT_ENGINES.check_kwargs(r.engine, dict(r.engine_kwargs), where="rollout.engine_kwargs")
        ADVANTAGES.check_kwargs(a.adv_estimator, a.adv_kwargs, where="algo.adv_kwargs")
        loss_opts = dict(a.loss_kwargs)
        POLICY_LOSSES.check_kwargs(a.policy_loss, loss_opts, where="algo.loss_kwargs")
    except RegistryError as e:
        raise ConfigError(str(e)) from None
    from reasonrl.rewards import VERIFIERS

    for term in cfg.reward.weights:
        if term != "correctness" and term not in VERIFIERS:
            raise ConfigError(
                f"reward.weights: unknown verifier {term!r}; known: {', '.join(VERIFIERS.names())}"
            )
    for name, opts in cfg.reward.options.items():
        try:
            VERIFIERS.check_kwargs(name, dict(opts), where=f"reward.options.{name}")
        except RegistryError as e:
            raise ConfigError(str(e)) from None
    positive = {
        "rollout.n": r.n,
        "rollout.max_new_tokens": r.max_new_tokens,
        "train.steps": t.steps,
        "train.dist_timeout_s": t.dist_timeout_s,
        "train.global_batch": t.global_batch,
        "train.mini_batch": t.mini_batch,
        "train.micro_batch": t.micro_batch,
        "train.epochs": t.epochs,
        "val.size": cfg.val.size,
        "val.n": cfg.val.n,
        "reward.workers": cfg.reward.workers,
        "reward.timeout_s": cfg.reward.timeout_s,
        "checkpoint.keep_last": cfg.checkpoint.keep_last,
        "data.max_prompt_tokens": cfg.data.max_prompt_tokens,
        "data.train_size": cfg.data.train_size,
        "data.val_size": cfg.data.val_size,
        "val.batch_size": cfg.val.batch_size,
        "train.grad_clip": t.grad_clip,  # a negative clip norm would flip the gradient
    }
    non_negative = {
        "train.warmup_steps": t.warmup_steps,
        "train.weight_decay": t.weight_decay,
        "rollout.top_k": r.top_k,
        "checkpoint.every": cfg.checkpoint.every,
        "val.every": cfg.val.every,
        "val.temperature": cfg.val.temperature,
        "log.rollouts_per_step": cfg.log.rollouts_per_step,
        "algo.entropy_coef": a.entropy_coef,
    }
    for key, v in non_negative.items():
        if v < 0:
            raise ConfigError(f"{key} must be >= 0, got {v}")
    for key, v in positive.items():
        if v <= 0:
            raise ConfigError(f"{key} must be > 0, got {v}")
    if t.lr <= 0:
        raise ConfigError(f"train.lr must be > 0, got {t.lr}")
    if r.temperature <= 0:
        raise ConfigError(
            f"rollout.temperature must be > 0 for training rollouts, got {r.temperature} (greedy samples of a "
            "prompt are all the same, so every group-relative advantage is 0)"
        )
    if r.n < 2 and getattr(ADVANTAGES.get(a.adv_estimator), "group_relative", False):
        raise ConfigError(
            f"rollout.n=1 with algo.adv_estimator={a.adv_estimator}, which compares each sample with the others "
            "of its group: every advantage would be 0. Use rollout.n >= 2 or a non-group estimator (reinforce_pp)"
        )
    if not 0 < r.top_p <= 1:
        raise ConfigError(f"rollout.top_p must be in (0, 1], got {r.top_p}")
    if t.global_batch % r.n:
        raise ConfigError(
            f"train.global_batch={t.global_batch} is not divisible by rollout.n={r.n} (the group size)"
        )
    if t.mini_batch > t.global_batch or t.global_batch % t.mini_batch:
        raise ConfigError(f"train.mini_batch={t.mini_batch} must divide train.global_batch={t.global_batch}")
    if t.micro_batch > t.mini_batch:
        raise ConfigError(f"train.micro_batch={t.micro_batch} is larger than train.mini_batch={t.mini_batch}")
    if t.mini_batch % t.micro_batch:
        raise ConfigError(f"train.micro_batch={t.micro_batch} must divide train.mini_batch={t.mini_batch}")
    if len(t.betas) != 2:
        raise ConfigError(f"train.betas must have two values, got {t.betas}")
    if (a.clip_low is not None and a.clip_low < 0) or (a.clip_high is not None and a.clip_high < 0):
        raise ConfigError("algo.clip_low and algo.clip_high must be >= 0")
    if a.kl_coef < 0:
        raise ConfigError(f"algo.kl_coef must be >= 0, got {a.kl_coef}")
    _validate_algo_extras(a, r)
    _validate_async(a, r)
    _choice("checkpoint.best_mode", cfg.checkpoint.best_mode, ("max", "min"))
    if cfg.checkpoint.keep_best is not None and not cfg.checkpoint.keep_best.startswith("eval/"):
        raise ConfigError(
            f"checkpoint.keep_best={cfg.checkpoint.keep_best!r} must be a validation metric (eval/...)"
        )
    if cfg.val.benchmarks:
        from reasonrl.eval.benchmarks import resolve

        try:
            resolve(list(cfg.val.benchmarks))
        except InputError as e:
            raise ConfigError(f"val.benchmarks: {e}") from None


def _validate_async(a: AlgoConfig, r: RolloutConfig) -> None:
    if r.max_staleness < 0:
        raise ConfigError(f"rollout.max_staleness must be >= 0, got {r.max_staleness}")
    if r.worker_threads < 1 or r.worker_timeout_s <= 0:
        raise ConfigError("rollout.worker_threads must be >= 1 and rollout.worker_timeout_s > 0")
    if r.max_staleness and a.tis_cap <= 0:
        raise ConfigError(
            f"rollout.max_staleness={r.max_staleness} trains on samples from older policies; set "
            "algo.tis_cap (e.g. 2.0) so the loss corrects for the sampling policy (decoupled PPO)"
        )


def _validate_algo_extras(a: AlgoConfig, r: RolloutConfig) -> None:
    """Checks of the algo fields beyond estimator / loss / aggregation (shaping, guards, critic)."""
    from reasonrl.algorithms.advantages import TRAINER_INPUTS  # keyword tensors the trainer supplies

    reserved = [k for k in a.adv_kwargs if k in TRAINER_INPUTS]
    if reserved:
        raise ConfigError(f"algo.adv_kwargs.{reserved[0]} is set by the trainer, not the recipe")
    if a.kl_in_reward and a.kl_coef <= 0:
        raise ConfigError("algo.kl_in_reward=true needs algo.kl_coef > 0")
    if a.reward_map and (len(a.reward_map) != 2 or a.reward_map[0] >= a.reward_map[1]):
        raise ConfigError(f"algo.reward_map must be [low, high] with low < high, got {list(a.reward_map)}")
    if not 0 <= a.overlong_buffer <= r.max_new_tokens:
        raise ConfigError(
            f"algo.overlong_buffer={a.overlong_buffer} must be in [0, rollout.max_new_tokens={r.max_new_tokens}]"
        )
    if a.overlong_penalty < 0:
        raise ConfigError(f"algo.overlong_penalty must be >= 0, got {a.overlong_penalty}")
    if a.dynamic_sampling_max_rounds < 0:
        raise ConfigError(
            f"algo.dynamic_sampling_max_rounds must be >= 0, got {a.dynamic_sampling_max_rounds}"
        )
    for key in ("early_stop_ratio", "early_stop_kl", "critic_lr", "value_clip"):
        v = getattr(a, key)
        if v is not None and v <= 0:
            raise ConfigError(f"algo.{key} must be > 0 (or null), got {v}")
    if a.tis_cap < 0:
        raise ConfigError(f"algo.tis_cap must be >= 0 (0 = off), got {a.tis_cap}")
    from reasonrl.algorithms import ADVANTAGES

    if a.critic_model and "values" not in ADVANTAGES.get(a.adv_estimator).needs:
        raise ConfigError(
            f"algo.critic_model is only used by estimators with a critic (gae), not {a.adv_estimator}"
        )
