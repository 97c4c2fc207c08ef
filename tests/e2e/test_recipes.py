"""Every recipe in recipes/ trains end to end: loaded as written, pointed at a tiny random model with
tiny batch sizes (the recipe's mini-batch / batch ratio kept), 2 steps on CPU. Each run must log finite
losses, change the policy's weights, and log the metrics of the features the recipe turns on.
Extra rows combine options no recipe uses (TIS, KL in the reward on GRPO, the REINFORCE++ baseline
variant) and check the early stop really skips updates."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from reasonrl.config import load_config
from reasonrl.engines.checkpoint import list_checkpoints
from reasonrl.trainer.loop import train

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    """The matrices are tiny: one intra-op thread is ~4x faster than two spinning on a shared CPU."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


RECIPES = sorted((Path(__file__).parents[2] / "recipes").glob("*.yaml"))
GLOBAL = 8


def _overrides(recipe: Path, model_dir: str, run_dir: Path, extra: tuple[str, ...]) -> list[str]:
    full = load_config(recipe)
    mini = GLOBAL * full.train.mini_batch // full.train.global_batch
    sft = full.algo.objective == "sft"  # the data's responses: one a row, and no RL setting
    out = [
        f"model.path={model_dir}",
        "model.device=cpu",
        f"log.run_dir={run_dir}",
        "train.steps=2",
        f"train.global_batch={GLOBAL}",
        f"rollout.n={1 if sft else 4}",
        f"train.mini_batch={mini}",
        f"train.micro_batch={mini}",
        "rollout.max_new_tokens=8",
        "data.train_size=32",
        "val.size=4",
        "val.every=0",
        "val.n=1",
        "log.progress=false",
        "log.tensorboard=false",
        "checkpoint.every=0",
        "checkpoint.keep_last=1",
    ]
    if not sft:  # a random model earns no reward (zero group advantages): the entropy bonus moves it anyway
        out.append("algo.entropy_coef=0.01")
    if full.algo.shaping.overlong_buffer:
        out.append("algo.shaping.overlong_buffer=4")
    if (
        full.algo.dynamic_sampling.enabled
    ):  # a random model fails every group: each extra round is wasted here
        out.append("algo.dynamic_sampling.max_rounds=1")
    return out + list(extra)


def _run(recipe: Path, model_dir: str, run_dir: Path, *extra: str) -> list[dict]:
    return train(load_config(recipe, _overrides(recipe, model_dir, run_dir, extra)), log=lambda *_: None)[
        "history"
    ]


def _changed_fraction(model_dir: str, run_dir: Path) -> float:
    from transformers import AutoModelForCausalLM

    before = AutoModelForCausalLM.from_pretrained(model_dir).state_dict()
    after = AutoModelForCausalLM.from_pretrained(list_checkpoints(run_dir)[-1]).state_dict()
    return sum(not torch.equal(before[k], after[k]) for k in before) / len(before)


# metrics each recipe must log (besides losses): proof that its features ran
FEATURE_KEYS = {
    "grpo": ["loss/kl"],
    "dapo": ["rollout/ds_rounds", "rollout/ds_dropped_groups", "reward/overlong_penalty"],
    "reinforce_pp": ["reward/kl_penalty"],
    "ppo_gae": ["loss/value", "critic/explained_var", "critic/returns_mean"],
    "rlinf_math": ["reward/shaped_mean", "actor/early_stopped_minibatches"],
    "remax": ["reward/baseline_mean"],
    "clip_cov": ["actor/cov_selected_tokens", "actor/cov_selected_frac"],
    "kl_cov": ["actor/cov_selected_tokens", "actor/cov_selected_frac"],
    "vespo": ["actor/phi_mean"],
}


@pytest.mark.parametrize("recipe", RECIPES, ids=[p.stem for p in RECIPES])
def test_recipe_trains(recipe, tiny_model_dir, tmp_path):
    history = _run(recipe, tiny_model_dir, tmp_path / "run")
    assert [r["step"] for r in history] == [0, 1, 2]
    rl = (
        ("loss/policy", "actor/entropy")
        if load_config(recipe).algo.objective == "rl"
        else ("loss/nll", "actor/perplexity")
    )
    for row in history[1:]:
        for key in ("loss/total", *rl, "grad_norm", *FEATURE_KEYS.get(recipe.stem, [])):
            assert row.get(key) is not None and math.isfinite(row[key]), (key, row.get(key))
    assert _changed_fraction(tiny_model_dir, tmp_path / "run") > 0.5
    if recipe.stem == "rlinf_math":  # every reward is 0 or 1 mapped to -5 / +5
        assert all(history[i]["reward/shaped_mean"] == 10 * history[i]["reward/mean"] - 5 for i in (1, 2))
    if recipe.stem == "dapo":  # a random model solves nothing: every round is dropped, then the fallback
        row = history[1]
        assert row["rollout/ds_fallback"] == 0.0 or row["rollout/ds_rounds"] == 2.0


COMBOS = [
    (
        "grpo",
        ("algo.off_policy.tis_cap=2.0", "algo.kl.in_reward=true"),
        ["actor/is_weight_mean", "reward/kl_penalty"],
    ),
    ("reinforce_pp", ("algo.adv_estimator=reinforce_pp_baseline",), ["reward/kl_penalty"]),
    (
        "dapo",  # per-term advantages with a shaping term and the overlong penalty as a third term
        (
            "algo.adv_estimator=gdpo",
            "reward.weights={correctness: 1.0, format_think_answer: 0.2}",
            "algo.adv_kwargs={}",
            "algo.dynamic_sampling.enabled=false",
        ),
        ["reward/overlong_penalty", "actor/advantage_abs_mean"],
    ),
    (
        "sapo",  # two mini-batches: old log-probs precomputed, the corrections on the stored weights
        (
            "algo.off_policy.tis_cap=5",
            "algo.off_policy.tis_mode=sequence_mask",
            "algo.off_policy.tis_floor=0.2",
            "algo.off_policy.mask_threshold=0.5",
            "algo.kl.coef=0.01",
            "algo.kl.importance_weighted=true",
        ),
        ["actor/is_weight_mean", "actor/opsm_masked_frac", "actor/gate_weight_mean", "loss/kl"],
    ),
    (
        "ppo_gae",
        ("algo.kl.coef=0.01", "algo.kl.in_reward=true", "algo.critic.value_clip=null"),
        ["loss/value"],
    ),
]


@pytest.mark.parametrize("name,extra,keys", COMBOS, ids=[" ".join(c[1]) for c in COMBOS])
def test_option_combinations_train(name, extra, keys, tiny_model_dir, tmp_path):
    recipe = Path(__file__).parents[2] / "recipes" / f"{name}.yaml"
    history = _run(recipe, tiny_model_dir, tmp_path / "run", *extra)
    for row in history[1:]:
        for key in ("loss/total", *keys):
            assert row.get(key) is not None and math.isfinite(row[key]), (key, row.get(key))
    if "algo.kl.in_reward=true" in extra:
        assert all("loss/kl" not in row for row in history)  # KL is in the reward, not the loss
    assert _changed_fraction(tiny_model_dir, tmp_path / "run") > 0.5


def test_early_stop_skips_every_minibatch_over_threshold(tiny_model_dir, tmp_path):
    """A threshold below 1 stops every mini-batch (the ratio starts at 1): no update at all."""
    recipe = Path(__file__).parents[2] / "recipes" / "rlinf_math.yaml"
    history = _run(recipe, tiny_model_dir, tmp_path / "run", "algo.off_policy.early_stop_ratio=0.5")
    assert [r["actor/early_stopped_minibatches"] for r in history[1:]] == [2.0, 2.0]
    assert all("loss/total" not in r for r in history[1:])
    assert _changed_fraction(tiny_model_dir, tmp_path / "run") == 0.0


def _stable(row: dict) -> dict:
    return {k: v for k, v in row.items() if not (k.startswith("perf/") or "latency" in k or "seconds" in k)}


def test_resume_is_exact_with_critic_and_dynamic_sampling(tiny_model_dir, tmp_path):
    """The policy's and the critic's weights and optimizers and the extra prompts drawn by dynamic
    sampling survive a restart: a run stopped after step 1 and resumed logs exactly the uninterrupted
    run's step 2 (GAE advantages are non-zero even for a random policy, so the policy does move)."""
    recipe = Path(__file__).parents[2] / "recipes" / "ppo_gae.yaml"
    extra = ("algo.dynamic_sampling.enabled=true", "algo.dynamic_sampling.max_rounds=1", "checkpoint.every=1")
    full = _run(recipe, tiny_model_dir, tmp_path / "a", *extra)  # 2 steps
    _run(recipe, tiny_model_dir, tmp_path / "b", *extra, "train.steps=1")
    cfg = load_config(recipe, _overrides(recipe, tiny_model_dir, tmp_path / "b", extra))
    resumed = train(cfg, resume=True, log=lambda *_: None)["history"]
    assert resumed[-1]["step"] == 2 and resumed[-1]["rollout/ds_rounds"] >= 1
    assert _stable(resumed[-1]) == _stable(full[-1])
