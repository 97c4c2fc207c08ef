"""LUFFY's launch script (verl's fork, `verl.mix_src.main_mix_ppo`) becomes a recipe with off-policy
guidance: demonstrations in the groups, its policy shaping, its GRPO variants; prefix guidance and an
unclipped ratio are named in notes; a plain verl script gets no guidance; the recipe loads."""

from __future__ import annotations

from _convert import convert_text, load_recipe

# LUFFY's exp_scripts/train.sh (2025-05), its command, paths shortened
LUFFY = """python3 -m verl.mix_src.main_mix_ppo \\
    algorithm.adv_estimator=grpo \\
    data.train_files=data/openr1.parquet \\
    data.val_files=data/valid.parquet \\
    data.train_batch_size=128 \\
    data.max_prompt_length=1024 \\
    data.max_response_length=8192 \\
    actor_rollout_ref.model.path=Elliott/Qwen2.5-Math-7B-16k-think \\
    actor_rollout_ref.actor.optim.lr=1e-6 \\
    actor_rollout_ref.actor.ppo_mini_batch_size=64 \\
    actor_rollout_ref.actor.kl_loss_coef=0.00 \\
    actor_rollout_ref.rollout.temperature=1.0 \\
    actor_rollout_ref.rollout.n=8 \\
    actor_rollout_ref.rollout.max_prefix_len=8192 \\
    algorithm.kl_ctrl.kl_coef=0.000 \\
    actor_rollout_ref.actor.entropy_coeff=0.001 \\
    actor_rollout_ref.actor.use_kl_loss=False \\
    actor_rollout_ref.actor.use_sft_prefix_reward=False \\
    actor_rollout_ref.rollout.prefix_share_across_samples=False \\
    actor_rollout_ref.rollout.prefix_strategy=random \\
    actor_rollout_ref.rollout.n_prefix=1 \\
    actor_rollout_ref.rollout.min_prefix_ratio=1.0 \\
    actor_rollout_ref.rollout.max_prefix_ratio=1.0 \\
    actor_rollout_ref.rollout.prefix_reward_weight_alpha=1.0 \\
    actor_rollout_ref.actor.use_off_policy_loss=True \\
    actor_rollout_ref.actor.off_policy_normalize=False \\
    actor_rollout_ref.actor.off_policy_reshape="p_div_p_0.1" \\
    actor_rollout_ref.actor.off_policy_loss_impl=token \\
    algorithm.grpo_use_std=False \\
    actor_rollout_ref.actor.loss_remove_token_mean=True \\
    actor_rollout_ref.actor.loss_remove_clip=True \\
    data.reward_impl_version=3 \\
    trainer.total_epochs=30
"""


def test_luffys_script_becomes_guidance_with_its_shaping_and_grpo_variant(tmp_path):
    out = convert_text(tmp_path, "verl", LUFFY)
    algo = out.recipe["algo"]
    assert algo["guidance"] == {"enabled": True, "shaping": "regularized", "gamma": 0.1}
    assert algo["adv_kwargs"]["scale_by_std"] is False and algo["loss_agg"] == "seq_mean_token_sum_norm"
    assert out.recipe["train"]["global_batch"] == 1024 and out.recipe["rollout"]["n"] == 8
    notes = "\n".join(out.notes)
    assert (
        "loss_remove_clip=True (the samples' ratio unclipped): reasonrl keeps the policy loss's clip" in notes
    )
    assert "`reasonrl data prepare luffy`" in notes
    keys = ("prefix", "off_policy", "grpo_use_std", "loss_remove_token_mean")  # every LUFFY key is read
    assert not [n for n in out.notes if "no reasonrl equivalent" in n and any(k in n for k in keys)], notes
    cfg = load_recipe(tmp_path, out.recipe, "data.train_files=[x.parquet]")
    assert (
        cfg.algo.guidance.enabled
        and cfg.algo.guidance.gamma == 0.1
        and cfg.data.response_key == "extra_info.response"
    )


def test_prefix_guidance_other_shapings_and_a_plain_script(tmp_path):
    prefix = LUFFY.replace("min_prefix_ratio=1.0", "min_prefix_ratio=0.2").replace("n_prefix=1", "n_prefix=2")
    out = convert_text(tmp_path, "verl", prefix.replace('"p_div_p_0.1"', "logp"))
    notes = "\n".join(out.notes)
    assert "prefix guidance (the policy completing part of a demonstration) is not built" in notes
    assert "rollout.n_prefix=2: reasonrl puts one demonstration in each group" in notes
    assert out.recipe["algo"]["guidance"] == {"enabled": True, "shaping": "logprob"}
    odd = convert_text(tmp_path, "verl", LUFFY.replace('"p_div_p_0.1"', "square_root"))
    assert "off_policy_reshape='square_root': no reasonrl equivalent" in "\n".join(odd.notes)
    every = convert_text(
        tmp_path, "verl", LUFFY.replace("n_prefix=1", "n_prefix=-1")
    )  # -1: all n of the group
    assert every.recipe["algo"]["guidance"]["enabled"] is True
    assert "rollout.n_prefix=8: reasonrl puts one demonstration in each group" in "\n".join(every.notes)
    off = convert_text(
        tmp_path, "verl", LUFFY.replace("use_off_policy_loss=True", "use_off_policy_loss=False")
    )
    assert "enabled" not in off.recipe["algo"].get("guidance", {})
    plain = convert_text(tmp_path, "verl", "python3 -m verl.trainer.main_ppo algorithm.adv_estimator=grpo "
                                           "actor_rollout_ref.rollout.n=4 data.train_batch_size=8")  # fmt: skip
    assert "guidance" not in plain.recipe.get("algo", {}) and "scale_by_std" not in str(plain.recipe)
