"""The run configuration's schema: one dataclass per section, composed into `RunConfig`.

Owns: every key, its type and default, with a comment saying what it means. Loading and overrides live
in `reasonrl.config` (the package), cross-field checks in `reasonrl.config.checks`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from reasonrl.config.rollout_sections import (  # noqa: F401 - re-exported
    InteractionConfig,
    RolloutConfig,
    SearchToolConfig,
    ToolsConfig,
)
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
    # module names (the last part of each name: q_proj, qkv_proj, in_proj, ...), or ["all-linear"] (peft's:
    # every linear layer but the output head; for Llama / Qwen-style models the same as q/k/v/o/gate/up/down
    # _proj, and right for Phi-3's fused qkv_proj, GPT-NeoX's query_key_value, Mamba's in_proj / out_proj)
    target_modules: list[str] = field(default_factory=lambda: ["all-linear"])


@dataclass
class ModelConfig:
    path: str = "demo"  # "demo" = the tiny bootstrapped model; else any HF directory or hub id
    dtype: str = "float32"  # float32 | bfloat16 (bf16 only on CUDA)
    device: str = "auto"  # auto | cpu | cuda
    gradient_checkpointing: bool = False  # recompute activations in backward (the policy and a critic)
    # > 0: log-probs and entropy from the last hidden states, this many positions at a time (the
    # [B, T, V] logits never exist at once; recomputed in backward); 0: from the full logits
    logprob_chunk: int = 0
    pack_tokens: int = (
        0  # > 0: the training forward packs rows into sequences of this many tokens (no padding)
    )
    # each mini-batch's rows go longest first, so a micro-batch holds rows of similar length, and each
    # micro-batch is cut to its longest row (no attention mask games: cheap on any device); with several
    # ranks the same comes with train.balance_tokens
    remove_padding: bool = False
    # torch.compile every decoder layer for training (engines/compiled.py): fused elementwise kernels;
    # the first steps pay the compilation (tens of seconds); generation stays eager
    compile: bool = False
    # every dropout of the policy (and critic) off for training, as TRL's disable_dropout (its default):
    # with dropout the update's forward differs from the no-grad one the old log-probs came from, so the
    # importance ratio is noise even on-policy. LoRA's own dropout (model.lora.dropout) is left as set
    disable_dropout: bool = True
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
    # the tokenizer's chat template's extra arguments for every prompt, e.g. {enable_thinking: false}
    # (Qwen3); a row's own `chat_template_kwargs` wins over these
    chat_template_kwargs: dict[str, Any] = field(default_factory=dict)
    # algo.objective=sft: the field of a row holding its response (extra_info.<key>, dotted, or ground_truth)
    response_key: str = "extra_info.response"
    # the field of a row holding its prompt text (extra_info.<key>), as one user message, instead of its chat
    # prompt (verl SFT's data.prompt_key); null: the row's `prompt`
    prompt_key: str | None = None
    # several sources with weights (docs/data.md): [{name, weight, files: [...]} | {name, weight, task,
    # difficulty} | {name, weight, reasoning_gym: 'a:2,b:1', config: [...]}]; replaces train_files / task
    mixture: list[dict[str, Any]] = field(default_factory=list)
    curriculum: CurriculumConfig = field(default_factory=CurriculumConfig)


@dataclass
class KLConfig:
    coef: float = 0.0  # > 0 adds a KL(policy || reference) loss term and loads a reference model
    estimator: str = "k3"
    in_reward: bool = False  # true: fold coef * KL(old || ref) into the rewards instead of the loss
    # > 0: the adaptive controller (Ziegler et al. 2019; verl's kl_ctrl.type=adaptive, OpenRLHF's
    # kl.target) moves the coefficient, starting at `coef`, toward a measured KL of `target` (in the
    # reward: the mean per-sequence KL; as a loss term: the step's KL term, loss/kl):
    # coef *= 1 + clip(kl / target - 1, -0.2, 0.2) * sequences / horizon each step; 0 = fixed
    target: float = 0.0
    horizon: int = 10000  # verl's and OpenRLHF's default
    # true: the KL loss term is weighted by pi / pi_old per token (DeepSeek-V3.2's unbiased KL estimate,
    # TRL's use_bias_correction_kl): its gradient is then that of KL(pi || ref) even for off-policy samples
    importance_weighted: bool = False
    # > 0: every this many steps (after the step's updates) the reference moves to the policy:
    # ref <- ref_sync_alpha * policy + (1 - ref_sync_alpha) * ref (alpha 1: ProRL's reference reset; TRL's
    # sync_ref_model uses 0.6 every 512 steps); 0 = the reference stays the initial model
    ref_sync_steps: int = 0
    ref_sync_alpha: float = 1.0
    # true: each reference sync also restarts the policy's optimizer (AdamW's moments and step counts as a
    # new optimizer's; the learning-rate schedule goes on): ProRL's full reset (arXiv:2505.24864)
    ref_sync_reset_optimizer: bool = False


@dataclass
class ShapingConfig:
    """Reward shaping, applied to the verifier score before advantages (docs/algorithms.md)."""

    reward_map: list[float] = field(default_factory=list)  # [low, high]: r -> low + (high - low) * r
    overlong_buffer: int = 0  # DAPO soft overlong penalty over the last N tokens of max_new_tokens; 0 = off
    overlong_penalty: float = 1.0  # the penalty at (and beyond) rollout.max_new_tokens
    mask_truncated: bool = False  # DAPO overlong filtering: no loss on completions cut at max_new_tokens
    # ProRL's stop-properly penalty (OpenRLHF's stop_properly_penalty_coef) for completions cut at
    # max_new_tokens: a number in [0, 1] scales their reward (0: no reward), a negative one replaces it;
    # null = off. Applied after reward_map and the overlong penalty
    truncated_reward: float | None = None


@dataclass
class DynamicSamplingConfig:
    """DAPO dynamic sampling: drop zero-variance groups, refill with new prompts."""

    enabled: bool = False
    max_rounds: int = 3  # extra generation rounds per step; then pad (trainer.sampling)


@dataclass
class OffPolicyConfig:
    """Update guards and corrections for samples that drifted from the policy being trained."""

    early_stop_ratio: float | None = None  # skip a mini-batch whose mean importance ratio exceeds this
    early_stop_kl: float | None = None  # ... or whose approx KL(old || current) exceeds this
    tis_cap: float = 0.0  # > 0: truncated IS weight min(pi_old / pi_sampler, cap) per token; 0 = off
    # how the weight is formed (TRL's vllm_importance_sampling_mode): token_truncate | token_mask |
    # sequence_truncate | sequence_mask (*_mask: weight 0 outside [tis_floor, tis_cap]; token_mask with
    # floor 0.5 and cap 5 is IcePop)
    tis_mode: str = "token_truncate"
    tis_floor: float = 0.0  # *_mask modes: weights below this are masked too; 0 = no lower bound
    # verl's rollout_is_batch_normalize: the weights divided by their mean (tokens, or sequences for the
    # sequence modes) over the step's batch on every rank; where they are taken in each update (bypass),
    # over that micro-batch, as verl's bypass loss does
    tis_normalize: bool = False
    # verl's rollout rejection sampling (rollout_rs): tokens / sequences whose sampler-vs-trainer divergence
    # leaves a criterion's bounds get no policy loss; each criterion {mode, high, low}: mode token_k1..3,
    # seq_sum_k1..3, seq_mean_k1..3, seq_max_k2/3; a k1 mode keeps ratios in [low, high] (low absent:
    # 1 / high), k2 / k3 divergences <= high; several: all must keep (docs/algorithms.md)
    reject: list[dict[str, Any]] = field(default_factory=list)
    # DeepSeek-V3.2's off-policy sequence masking (TRL's off_policy_mask_threshold): a negative-advantage
    # sequence whose mean per-token KL(sampler || current policy) exceeds this gets no policy loss; null = off
    mask_threshold: float | None = None
    # verl's bypass mode: the sampler's log-probs are the old ones (no forward pass computes them); the
    # loss's ratio is then pi / pi_sampler, so its clip bounds the sampler mismatch and staleness too, and
    # importance weights (a ratio-free loss: reinforce) and rejection compare the current policy with the sampler
    bypass: bool = False


@dataclass
class CriticConfig:
    """PPO's value model, used by estimators that need values (gae)."""

    model: str = ""  # "" = same as model.path (a value head is put on that backbone)
    lr: float | None = None  # None = train.lr
    value_clip: float | None = 0.2  # PPO value clipping range; None = unclipped
    # the first N steps train the critic only: the policy is not updated while its values are still those
    # of a fresh head (verl's trainer.critic_warmup, OpenRLHF's critic.freezing_steps); 0 = off
    warmup_steps: int = 0


@dataclass
class EntropyControlConfig:
    """Skywork-OR1's adaptive entropy control (arXiv:2505.22312; TRL's use_adaptive_entropy): after every
    optimizer update the entropy coefficient moves by `delta` toward keeping the policy's entropy at
    `target` (up while the update's mean entropy is at or below it, down while above; within [coef_min,
    coef_max]), and the bonus is applied only while the last measured entropy is at or below `target`.
    algo.entropy_coef is the starting coefficient."""

    enabled: bool = False
    target: float = 0.2  # nats per token (TRL's entropy_target default)
    delta: float = 0.005
    coef_min: float = 0.0
    coef_max: float = 1.0


@dataclass
class GuidanceConfig:
    """LUFFY's off-policy guidance (arXiv:2504.14945): each group holds rollout.n - 1 samples and the row's
    demonstration (its response at data.response_key, e.g. a stronger model's trace), scored and given
    advantages with the samples; the demonstration's tokens are trained with -A * f(pi) instead of the
    clipped ratio (docs/algorithms.md, "Off-policy guidance")."""

    enabled: bool = False
    # f of the demonstration token's probability under the policy: regularized p / (p + gamma) (LUFFY's
    # policy shaping, which weighs up the tokens the policy finds unlikely), prob (p: the ratio against an
    # expert taken to give each token probability 1) or logprob (log p: an advantage-weighted SFT term)
    shaping: str = "regularized"
    gamma: float = 0.1  # LUFFY's default


@dataclass
class AlgoConfig:
    # "rl", or "sft": supervised fine-tuning on the data's responses (data.response_key; trainer/sft.py)
    objective: str = "rl"
    adv_estimator: str = "grpo"
    adv_kwargs: dict[str, Any] = field(default_factory=dict)
    policy_loss: str = "ppo_clip"
    # None: the policy loss's own defaults (low / high): ppo_clip 0.2 / 0.2, gspo 3e-4 / 4e-4, gmpo 0.4 / 0.4
    # (log space), cispo 1.0 / 0.28; sapo and reinforce have no clip
    clip_low: float | None = None
    clip_high: float | None = None
    loss_kwargs: dict[str, Any] = field(default_factory=dict)  # extra options of the policy loss
    loss_agg: str = "token_mean"
    entropy_coef: float = 0.0
    entropy_control: EntropyControlConfig = field(default_factory=EntropyControlConfig)
    # < 1: the policy-gradient term trains only the top this share of each step's tokens by entropy (Wang
    # et al. 2025, "Beyond the 80/20 rule": 0.2); the KL and entropy terms and the normalisers keep every token
    top_entropy_quantile: float = 1.0
    kl: KLConfig = field(default_factory=KLConfig)
    shaping: ShapingConfig = field(default_factory=ShapingConfig)
    dynamic_sampling: DynamicSamplingConfig = field(default_factory=DynamicSamplingConfig)
    off_policy: OffPolicyConfig = field(default_factory=OffPolicyConfig)
    critic: CriticConfig = field(default_factory=CriticConfig)
    guidance: GuidanceConfig = field(default_factory=GuidanceConfig)


# flat algo keys of earlier releases -> where they live now (recipes using them get an error naming the
# new key; configs stored in older checkpoints are migrated by `reasonrl.config.migrate`)
RENAMED = {
    "algo.kl_coef": "algo.kl.coef", "algo.kl_estimator": "algo.kl.estimator", "algo.kl_in_reward": "algo.kl.in_reward",
    "algo.reward_map": "algo.shaping.reward_map", "algo.overlong_buffer": "algo.shaping.overlong_buffer",
    "algo.overlong_penalty": "algo.shaping.overlong_penalty", "algo.mask_truncated": "algo.shaping.mask_truncated",
    "algo.dynamic_sampling": "algo.dynamic_sampling.enabled",
    "algo.dynamic_sampling_max_rounds": "algo.dynamic_sampling.max_rounds",
    "algo.early_stop_ratio": "algo.off_policy.early_stop_ratio", "algo.early_stop_kl": "algo.off_policy.early_stop_kl",
    "algo.tis_cap": "algo.off_policy.tis_cap", "algo.critic_model": "algo.critic.model",
    "algo.critic_lr": "algo.critic.lr", "algo.value_clip": "algo.critic.value_clip",
}  # fmt: skip


@dataclass
class PseudoLabelConfig:
    """Rewards without labels (reward.pseudo_label; TTRL, arXiv:2504.16084): each prompt's samples vote, and
    the answer most of them give is the label every sample is scored against (docs/rewards.md)."""

    enabled: bool = False
    # samples per prompt that vote (TTRL's n_votes_per_prompt, e.g. 64); the first rollout.n of them train
    # (n_samples_per_prompt, e.g. 32). 0: rollout.n, all of them vote and train
    votes: int = 0
    # rows with a label of their own (ground truth not "") are scored against it and do not vote: labelled and
    # unlabelled data in one run. false (TTRL's): every row votes; its own label only checks the votes
    own_labels: bool = False
    # a prompt whose majority answer has fewer than this share of its votes gets no label: its samples score 0
    # (no gradient from labels the samples barely agree on). 0: every majority counts (TTRL's)
    min_ratio: float = 0.0


@dataclass
class ConfidenceConfig:
    """Rewards from the policy's own confidence, no labels used (reward.confidence; Intuitor, RENT, EM-RL;
    docs/rewards.md): each completion's reward is the mean over its tokens of the measure."""

    # none | self_certainty (KL(uniform || p), Intuitor) | neg_entropy (RENT) | logprob (EM-RL's sequence one)
    measure: str = "none"


@dataclass
class RewardConfig:
    workers: int = 2  # verifier worker processes (for verifiers that are not cheap and inline)
    timeout_s: float = 10.0  # per call; a stuck worker is killed and the call scores 0
    # correctness (the routed verifier) plus shaping terms by verifier name, e.g. {format_think_answer: 0.1}
    weights: dict[str, float] = field(default_factory=lambda: {"correctness": 1.0})
    options: dict[str, Any] = field(default_factory=dict)  # keyword options per verifier name
    # a verifier for every row of the run's data files (train_files, val_files, a mixture's files) whatever
    # its data_source, unless the row names its own; e.g. verl_function (a verl reward function file, with
    # reward.options.verl_function.path). Generated tasks and val.benchmarks keep their own verifiers
    verifier: str | None = None
    # a prompt that opens <think> (R1-style templates): an answer left in the unclosed block scores 0
    think_from_prompt: bool = True
    # a verifier whose calls end in errors (it raised, its worker died, its judge / sandbox service
    # failed) on more than this share of a step's calls warns; error_patience such steps in a row stop
    # the run before that step's update (0: warn only). A program's own timeout is its score, not an error
    max_error_rate: float = 0.5
    error_patience: int = 3
    # the network services the data's verifiers call (an LLM judge, SandboxFusion servers) must accept a
    # connection before the model loads; one that does not yet is waited for this long (it may be starting)
    service_wait_s: float = 60.0
    pseudo_label: PseudoLabelConfig = field(default_factory=PseudoLabelConfig)
    confidence: ConfidenceConfig = field(default_factory=ConfidenceConfig)


@dataclass
class TrainConfig:
    steps: int = 100
    global_batch: int = 128  # sequences per step = prompts per step * rollout.n
    mini_batch: int = 128  # sequences per optimizer step (global_batch / mini_batch updates per step)
    micro_batch: int = 64  # sequences per forward/backward (gradient accumulation)
    # > 0: a micro-batch also ends before it would hold more than this many real (prompt + completion)
    # tokens (verl's dynamic batch size); rows run longest first; a longer row gets one of its own
    micro_tokens: int = 0
    epochs: int = 1  # passes over each rollout batch
    lr: float = 1e-5
    weight_decay: float = 0.0
    betas: list[float] = field(default_factory=lambda: [0.9, 0.999])
    warmup_steps: int = 0  # optimizer steps of linear warm-up
    # or a share of the run's optimizer steps, rounded up (TRL's warmup_ratio, verl's lr_warmup_steps_ratio)
    warmup_ratio: float = 0.0
    lr_schedule: str = "constant"  # constant | linear | cosine (decay to min_lr_ratio * lr at the end)
    min_lr_ratio: float = 0.0
    grad_clip: float = 1.0
    seed: int = 0
    # auto: fsdp2 under torchrun (WORLD_SIZE > 1), else single; global_batch and mini_batch are global
    # (split over ranks), micro_batch is per rank (docs/distributed.md)
    engine: str = "auto"
    cpu_offload: bool = False  # fsdp2: parameters and optimizer state in CPU memory
    # several ranks: each mini-batch is re-split so every rank trains on about the same number of
    # tokens, rows of similar length share micro-batches, and their unused padding is cut
    # (trainer/balance.py); no effect on one process
    balance_tokens: bool = True
    dist_timeout_s: float = (
        1800.0  # several ranks: a collective waiting longer fails (a rank crashed / hangs)
    )
    # stop early when a logged metric crosses a bound: [{metric: eval/accuracy, below: 0.2, patience: 2}, ...]
    # (trainer/stop_rules.py: the run ends after that step, with a checkpoint)
    stop_when: list[Any] = field(default_factory=list)


@dataclass
class ValConfig:
    every: int = 0  # 0 = only before and after training
    size: int = 200
    n: int = 1  # samples per problem for mean@n at val temperature (besides greedy accuracy)
    temperature: float = 1.0
    # mean@n's nucleus / top-k filters (verl's val_kwargs.top_p / top_k); None: the rollout's
    top_p: float | None = None
    top_k: int | None = None
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
    # the optimizer state written shard by shard by every rank (torch.distributed.checkpoint, dcp/),
    # and (not LoRA) the HF weight files consolidated from the shards (HuggingFaceStorageWriter): no
    # rank holds the full model; resumes on any number of ranks; False: full state gathered by rank 0
    sharded: bool = False


@dataclass
class LogConfig:
    run_dir: str = "runs/latest"
    rollouts_per_step: int = (
        4  # prompt groups (each with all n completions) written to rollouts.jsonl per step
    )
    tensorboard: bool = True
    progress: bool = True
    wandb: bool = False  # mirror metrics to Weights & Biases (pip install reasonrl[wandb])
    wandb_project: str = "reasonrl"
    wandb_entity: str | None = None
    wandb_mode: str = ""  # online | offline | disabled; "" = wandb's own default (WANDB_MODE, else online)
    # the actor/entropy metric; with algo.entropy_coef = 0 turning it off skips its pass over the logits
    # (7% of a policy update on an H100 at 0.5B, 4k: docs/distributed.md)
    entropy: bool = True


@dataclass
class HubConfig:
    push: bool = False  # at the end of training: export the last checkpoint (with a model card) and upload it
    repo: str = ""  # ORG/NAME on the Hugging Face Hub (HF_ENDPOINT / HF_TOKEN are honoured)
    private: bool = True
    with_optimizer: bool = False  # also upload training_state/ (optimizer, scheduler, RNG) to resume from


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
    hub: HubConfig = field(default_factory=HubConfig)
    watchdog: WatchdogConfig = field(default_factory=WatchdogConfig)  # per-phase deadlines (s; 0 = off)
