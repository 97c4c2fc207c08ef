"""TTRL (PRIME-RL/TTRL) to reasonrl: its launch scripts' three ways of turning majority votes on, as
`reward.pseudo_label`, and its test-time data files, with or without their labels."""

from __future__ import annotations

import json

import pytest
from _convert import convert_text, load_recipe

from reasonrl.data.prepare import convert_files, prepare
from reasonrl.data.schema import load_problems
from reasonrl.errors import InputError
from reasonrl.rewards import score
from reasonrl.rewards.routing import check_routable

A = "actor_rollout_ref."
# the shape of TTRL's examples/ttrl/aime.sh (its reward manager), the values its own
MANAGER = f"""N_VOTES_PER_PROMPT=64
N_SAMPLES_PER_PROMPT=32
python -m verl.trainer.main_ppo \\
  reward_model.reward_manager=ttrl \\
  reward_model.reward_kwargs.n_samples_per_prompt=$N_SAMPLES_PER_PROMPT \\
  reward_model.reward_kwargs.n_votes_per_prompt=$N_VOTES_PER_PROMPT \\
  reward_model.reward_kwargs.mode="train" \\
  data.train_files=["data/AIME-TTT/train.parquet"] \\
  data.train_batch_size=8 \\
  {A}model.path=Qwen/Qwen2.5-Math-1.5B \\
  {A}actor.ppo_mini_batch_size=1 \\
  {A}actor.ppo_micro_batch_size_per_gpu=2 \\
  {A}rollout.do_vote=True \\
  {A}rollout.n_vote=$N_VOTES_PER_PROMPT \\
  {A}rollout.n=$N_SAMPLES_PER_PROMPT \\
  algorithm.adv_estimator=grpo \\
  trainer.total_training_steps=10
"""
# the later `ttrl.*` section, with TTRL's own math grader as the custom reward function
SECTION = f"""python -m verl.trainer.main_ppo \\
  data.train_files=["data/MATH-TTT/train.parquet"] \\
  data.train_batch_size=32 \\
  {A}model.path=Qwen/Qwen2.5-Math-7B \\
  {A}actor.ppo_mini_batch_size=2 \\
  {A}actor.ppo_micro_batch_size_per_gpu=2 \\
  {A}rollout.n=16 \\
  custom_reward_function.path="./verl/utils/reward_score/ttrl_math/__init__.py" \\
  custom_reward_function.name=reward_func \\
  ttrl.enable=True \\
  ttrl.n_votes_per_prompt=16 \\
  ttrl.n_samples_per_prompt=4 \\
  trainer.total_training_steps=10
"""


def test_the_reward_managers_votes_and_samples_become_pseudo_labels_and_group_size(tmp_path):
    got = convert_text(tmp_path, "verl", MANAGER)
    r = got.recipe
    assert r["reward"]["pseudo_label"] == {"enabled": True, "votes": 64}
    assert r["rollout"]["n"] == 32
    assert (
        r["train"]["global_batch"] == 8 * 32 and r["train"]["mini_batch"] == 32
    )  # counted in trained samples
    assert not any("reward_manager" in n or "do_vote" in n or "n_vote" in n for n in got.notes)  # all read
    cfg = load_recipe(tmp_path, r)
    assert cfg.reward.pseudo_label.enabled and cfg.reward.pseudo_label.votes == 64 and cfg.rollout.n == 32


def test_the_ttrl_section_and_its_own_grader_become_the_routed_verifiers(tmp_path):
    got = convert_text(tmp_path, "verl", SECTION)
    r = got.recipe
    assert r["reward"]["pseudo_label"] == {"enabled": True, "votes": 16}
    assert r["rollout"]["n"] == 4 and r["train"]["global_batch"] == 32 * 4 and r["train"]["mini_batch"] == 8
    assert "verifier" not in r["reward"] and "options" not in r["reward"]  # no verl_function on TTRL's file
    assert any("TTRL's own grader" in n for n in got.notes)
    load_recipe(tmp_path, r)  # (with the verl_function left in, loading fails: the file is not here)


@pytest.mark.parametrize(("estimator", "kind", "on", "measure"), [
    ("majority_voting", "ensemble", True, None), ("self_certainty", "certainty", False, "self_certainty"),
    ("token_level_entropy", "certainty", False, "neg_entropy"), ("probability", "certainty", False, None),
    ("trajectory_level_entropy", "certainty", False, "logprob"), ("self_verify", "certainty", False, None),
])  # fmt: skip
def test_unsupervised_reward_votes_or_measures_confidence(tmp_path, estimator, kind, on, measure):
    script = SECTION.replace("ttrl.enable=True", f"unsupervised_reward.enable=True \\\n  unsupervised_reward.type={kind} "
                             f"\\\n  unsupervised_reward.estimator={estimator}")  # fmt: skip
    script = script.replace("ttrl.n_votes_per_prompt=16 \\\n  ttrl.n_samples_per_prompt=4 \\\n  ", "")
    got = convert_text(tmp_path, "verl", script)
    assert got.recipe["reward"].get("pseudo_label", {}).get("enabled", False) is on
    assert got.recipe["reward"].get("confidence", {}).get("measure") == measure
    assert any(f"estimator={estimator}: not built" in n for n in got.notes) is (not on and measure is None)
    assert "verifier" not in got.recipe["reward"]  # TTRL's grader: the routed verifiers, votes or not
    load_recipe(tmp_path, got.recipe)
    if on:  # votes = samples = the script's rollout.n (TTRL's defaults)
        assert got.recipe["reward"]["pseudo_label"]["votes"] == 16 and got.recipe["rollout"]["n"] == 16


def _ttt(tmp_path, rows, name="GPQA-TTT.json"):
    path = tmp_path / name
    path.write_text(json.dumps(rows))
    return path


GPQA = [{"prompt": "Which is noble?\n\nA. Iron\nB. Argon\nC. Tin\nD. Lead", "answer": "B", "source": "gpqa_diamond",
         "id": "0"}, {"prompt": "Which is a metal?\n\nA. Neon\nB. Argon\nC. Tin\nD. Helium", "answer": "C",
                      "source": "gpqa_diamond", "id": "1"}]  # fmt: skip


def test_gpqa_rows_route_to_choice_and_without_labels_only_voting_lets_them_through(tmp_path):
    src = _ttt(tmp_path, GPQA)
    (p, q), _ = convert_files("ttrl", [str(src)])
    assert (p.data_source, p.ground_truth, p.uid) == ("GPQA-TTT", "B", "GPQA-TTT/0")
    assert score("\\boxed{B}", p).score == 1.0 and score("\\boxed{C}", p).score == 0.0
    out = tmp_path / "unlabelled.parquet"
    prepare("ttrl", [str(src)], out, {"labels": False})
    rows = load_problems([str(out)])
    assert [r.ground_truth for r in rows] == ["", ""] and rows[1].user_text.startswith("Which is a metal?")
    check_routable(rows, "train", vote=True)
    with pytest.raises(InputError, match="ground truth '' is not an option letter"):
        check_routable(rows, "train")


@pytest.mark.parametrize(("rows", "options", "match"), [
    ([{"prompt": "x", "answer": "1", "source": "hmmt", "id": "0"}], {}, r"row 0: field 'source': 'hmmt' is not one"),
    ([{"prompt": "x", "answer": "E", "source": "gpqa_diamond"}], {}, r"row 0: field 'answer': a GPQA-TTT answer is"),
    ([{"prompt": "x", "answer": "AB", "source": "gpqa_diamond"}], {}, r"answer is an option letter A-D, got 'AB'"),
    ([{"prompt": "x", "source": "math"}], {}, r"row 0: field 'answer': missing"),
    ([{"prompt": "x", "answer": "1"}], {"labels": "no"}, "option labels must be true or false"),
])  # fmt: skip
def test_bad_rows_and_options_are_named(tmp_path, rows, options, match):
    with pytest.raises(InputError, match=match):
        prepare("ttrl", [str(_ttt(tmp_path, rows, "x.json"))], tmp_path / "out.parquet", options)
    assert not (tmp_path / "out.parquet").exists()
