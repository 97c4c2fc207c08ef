"""Validation's sampled mean@n takes val.top_p / val.top_k where the recipe sets them (verl's
val_kwargs), the rollout's filters otherwise; the greedy accuracy never samples; verl's val_kwargs
convert to them."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import yaml

import reasonrl.trainer.setup as setup
from reasonrl.config import ConfigError, load_config
from reasonrl.config.foreign import convert
from reasonrl.eval.accuracy import Evaluation


def _sampling_used(monkeypatch, overrides):
    cfg = load_config(None, ["rollout.top_p=0.9", "rollout.top_k=20", "val.n=4", "val.temperature=0.6",
                             *overrides])  # fmt: skip
    seen = {}

    def fake_evaluate(engine, tokenizer, problems, params, **kw):
        seen[params.n] = params
        return Evaluation(0.5, [], ["ok"])

    monkeypatch.setattr(setup, "evaluate", fake_evaluate)
    run = SimpleNamespace(benchmarks=None, val=[SimpleNamespace(verifier=None)], think_from_prompt=False, rollout_engine=None,
                          tokenizer=None, scorer=None)  # fmt: skip
    out = setup._validate(run, cfg, "step 0", lambda *a: None)
    assert set(out) >= {"eval/accuracy", "eval/mean@4"}
    return seen


def test_mean_at_n_takes_val_filters_else_the_rollouts(monkeypatch):
    seen = _sampling_used(monkeypatch, [])
    greedy, sampled = seen[1], seen[4]
    assert greedy.temperature == 0  # the accuracy is greedy whatever the filters
    assert (sampled.temperature, sampled.top_p, sampled.top_k) == (0.6, 0.9, 20)  # the rollout's filters
    sampled = _sampling_used(monkeypatch, ["val.top_p=0.95", "val.top_k=0"])[4]
    assert (sampled.temperature, sampled.top_p, sampled.top_k) == (0.6, 0.95, 0)
    sampled = _sampling_used(monkeypatch, ["val.top_k=5"])[4]  # one set, the other the rollout's
    assert (sampled.top_p, sampled.top_k) == (0.9, 5)


@pytest.mark.parametrize("override,needle", [("val.top_p=0", "val.top_p must be in (0, 1]"),
                                             ("val.top_p=1.5", "val.top_p must be in (0, 1]"),
                                             ("val.top_k=-1", "val.top_k must be >= 0")])  # fmt: skip
def test_bad_val_filters_name_the_key(override, needle):
    with pytest.raises(ConfigError, match=needle.replace("(", r"\(").replace("]", r"\]")):
        load_config(None, [override])


def test_verl_val_kwargs_convert(tmp_path):
    script = tmp_path / "run.sh"
    script.write_text("python3 -m verl.trainer.main_ppo data.train_batch_size=32 actor_rollout_ref.rollout.n=4 "
                      "actor_rollout_ref.actor.ppo_mini_batch_size=16 "
                      "actor_rollout_ref.rollout.val_kwargs.n=4 actor_rollout_ref.rollout.val_kwargs.temperature=1.0 "
                      "actor_rollout_ref.rollout.val_kwargs.top_p=0.7 actor_rollout_ref.rollout.val_kwargs.top_k=-1 "
                      "actor_rollout_ref.rollout.val_kwargs.do_sample=True\n")  # fmt: skip
    out = convert("verl", script)
    assert out.recipe["val"] == {"n": 4, "temperature": 1.0, "top_p": 0.7, "top_k": 0}
    notes = "\n".join(out.notes)
    assert "val_kwargs.do_sample: not needed (eval/accuracy is always greedy" in notes
    assert "no reasonrl equivalent" not in notes
    recipe = tmp_path / "r.yaml"
    recipe.write_text(yaml.safe_dump({k: v for k, v in out.recipe.items() if k != "model"}))
    v = load_config(recipe, ["rollout.engine=hf"]).val
    assert (v.top_p, v.top_k) == (0.7, 0)
