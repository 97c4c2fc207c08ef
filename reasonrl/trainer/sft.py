"""Supervised fine-tuning (`algo.objective: sft`): the same trainer, engines, checkpoints, resume,
validation and run directory as RL, trained on the data's own responses instead of sampled ones (a cold
start before RL, distillation of long reasoning traces, rejection-sampling fine-tuning), as verl's SFT
trainer, TRL's SFTTrainer and OpenRLHF's train_sft do.

Each step takes `train.global_batch` rows from the prompt sampler (so the data order, the mixture, and
exact resume are the RL run's), renders each prompt as for rollouts (chat template, `data.*`), appends
the row's response (`data.response_key`, a field of the row: `extra_info.answer` in verl's GSM8K parquet)
and the end-of-text token, and trains the negative log-likelihood of the response tokens (loss on the
prompt: none), aggregated by `algo.loss_agg` (token_mean: verl's and TRL's default). A response longer
than `rollout.max_new_tokens` is cut there (without its end token; `rollout/truncated_frac`). Logged:
`loss/nll` and `actor/perplexity` per step; validation is the run's own (greedy accuracy with the
verifiers on `data.val_files`, `val.benchmarks`), plus `eval/nll` on validation rows that have a response.

Owns: the check of the settings (`check_sft`: RL-only settings are refused, naming the key), the rows'
responses (`response_of`, `check_responses`: a row without one is an InputError naming it before the
model loads), the step's batch (`SftRollouts`, the trainer's rollout source) and `validation_nll`.
Does not own: the loss (`trainer.step.make_loss_fn`), the loop (`trainer.loop`).
"""

from __future__ import annotations

import dataclasses

import torch

from reasonrl import distributed as dist
from reasonrl.config import ConfigError, RunConfig
from reasonrl.errors import InputError
from reasonrl.trainer.rollout_source import SyncRollouts
from reasonrl.trainer.sampling import StepRollouts
from reasonrl.types import Completion, Problem, RolloutGroup

# algo keys that keep their meaning in SFT (everything else in `algo` is an RL setting)
KEPT = ("objective", "loss_agg")


def _leaves(x, prefix: str):
    if dataclasses.is_dataclass(x):
        for f in dataclasses.fields(x):
            yield from _leaves(getattr(x, f.name), f"{prefix}.{f.name}")
    else:
        yield prefix, x


def check_sft(cfg: RunConfig) -> None:
    """ConfigError naming the first setting SFT cannot honour (module docstring)."""
    from reasonrl.config import AlgoConfig

    defaults = dict(_leaves(AlgoConfig(), "algo"))
    for key, value in _leaves(cfg.algo, "algo"):
        if key.split(".")[1] not in KEPT and value != defaults[key]:
            raise ConfigError(f"{key}={value!r} is an RL setting; algo.objective=sft trains on the data's "
                              "responses (no sampling, no rewards, no advantages): remove it")  # fmt: skip
    r = cfg.rollout
    if r.n != 1:
        raise ConfigError(
            f"rollout.n={r.n} with algo.objective=sft: each row has one response; set rollout.n=1"
        )
    if r.max_staleness:
        raise ConfigError("rollout.max_staleness > 0 with algo.objective=sft: SFT samples nothing to overlap")
    if r.tools.enabled:
        raise ConfigError(
            "rollout.tools.enabled with algo.objective=sft: training on tool transcripts is not built"
        )
    if cfg.reward.weights and list(cfg.reward.weights) != ["correctness"]:
        raise ConfigError("reward.weights with algo.objective=sft: rewards do not train SFT (validation uses the "
                          "verifiers' correctness only)")  # fmt: skip


def response_of(problem: Problem, key: str):
    """The value at `key` of a problem's row: `extra_info.<field>` (dotted, nested), `ground_truth`, or
    None where there is none."""
    head, _, rest = key.partition(".")
    value = getattr(problem, head, None) if head in ("extra_info", "ground_truth") else None
    for part in rest.split(".") if rest else ():
        value = value.get(part) if isinstance(value, dict) else None
    return value


def check_responses(problems: list[Problem], key: str, what: str) -> None:
    """InputError naming the first row whose response (data.response_key) is not a non-empty string."""
    for i, p in enumerate(problems):
        value = response_of(p, key)
        if not isinstance(value, str) or not value:
            got = "nothing" if value is None else f"{type(value).__name__} {str(value)[:40]!r}"
            raise InputError(f"{what}: row {i} (uid {p.uid or '-'}): no response text at {key} (data.response_key; "
                             f"algo.objective=sft trains on it), got {got}")  # fmt: skip


def response_ids(tokenizer, problem: Problem, key: str, max_tokens: int) -> tuple[list[int], bool]:
    """(the response's tokens and the end-of-text token, cut to `max_tokens`; whether it was cut)."""
    ids = tokenizer(response_of(problem, key), add_special_tokens=False)["input_ids"] + [
        tokenizer.eos_token_id
    ]
    return ids[:max_tokens], len(ids) > max_tokens


class SftRollouts(SyncRollouts):
    """The trainer's rollout source under SFT: each step's rows with their own responses (module docstring)."""

    def get(self, step: int) -> tuple[StepRollouts, dict[str, float]]:
        from reasonrl.data.prompts import encode_prompts

        run, cfg = self.run, self.cfg
        problems = dist.shard(run.sampler.next())  # every rank draws the whole step; trains on its share
        prompts = encode_prompts(run.tokenizer, problems, run.max_prompt_tokens)
        groups = []
        for p, prompt in zip(problems, prompts):
            ids, cut = response_ids(run.tokenizer, p, cfg.data.response_key, cfg.rollout.max_new_tokens)
            text = run.tokenizer.decode(ids, skip_special_tokens=True)
            groups.append(
                RolloutGroup(
                    p, prompt, [Completion(ids, text, [0.0] * len(ids), "length" if cut else "stop")]
                )
            )
        return StepRollouts(
            groups, run.sampler.metrics(), None, self.version, 0.0, run.sampler.state_dict()
        ), {}


def validation_nll(run, cfg: RunConfig, problems: list[Problem]) -> dict[str, float]:
    """`eval/nll`: the token-mean negative log-likelihood of the validation rows' responses (those that have
    one) under the policy; {} where none has."""
    from reasonrl.data.prompts import encode_prompts
    from reasonrl.trainer.batching import build_batch

    key = cfg.data.response_key
    rows = [p for p in problems if isinstance(response_of(p, key), str) and response_of(p, key)]
    if not rows:
        return {}
    total, tokens = 0.0, 0
    prompts = encode_prompts(run.tokenizer, rows, run.max_prompt_tokens)
    for s in range(0, len(rows), cfg.train.micro_batch):
        groups = []
        for p, prompt in zip(rows[s : s + cfg.train.micro_batch], prompts[s : s + cfg.train.micro_batch]):
            ids, _ = response_ids(run.tokenizer, p, key, cfg.rollout.max_new_tokens)
            groups.append(RolloutGroup(p, prompt, [Completion(ids, "", [0.0] * len(ids))]))
        batch = build_batch(groups, run.pad_id)
        logprobs = run.train_engine.logprobs(batch, cfg.train.micro_batch)
        total += float(-(logprobs * batch.mask).sum())
        tokens += int(batch.mask.sum())
    return {"eval/nll": total / max(tokens, 1), "eval/nll_tokens": float(tokens)}


def perplexity(metrics: dict) -> dict[str, float]:
    """`actor/perplexity` = exp(loss/nll) where the step logged one (token_mean: per token)."""
    nll = metrics.get("loss/nll")
    return {} if nll is None else {"actor/perplexity": float(torch.exp(torch.tensor(float(nll))))}
