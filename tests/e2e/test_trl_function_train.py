"""A run rewarded by TRL reward functions (`reward.verifier: trl_function`): the verifier workers import the
user's module from the working directory, as `trl grpo` does, every step's reward is the functions' weighted
sum, and each function's scores are in rollouts.jsonl and the metrics."""

from __future__ import annotations

import json

from test_train_loop import _cfg

from reasonrl.trainer.loop import train

REWARDS = """
def odd_length(prompts, completions, solution, **kwargs):
    assert prompts[0][-1]["content"].endswith("+ 2 =") and solution == ["5"] and kwargs["k"] == [1]
    return [1.0 if len(c[0]["content"]) % 2 else 0.25 for c in completions]

def only_even_rows(completions, row, **kwargs):
    return [None if r % 2 else 0.5 for r in row]

def progress(completions, trainer_state, **kwargs):  # TRL's schedules read the step this way
    return [trainer_state.global_step / trainer_state.max_steps for _ in completions]
"""


def test_a_run_trains_on_the_rewards_of_trl_functions(tiny_model_dir, tmp_path, user_module):
    m = user_module(REWARDS, "trl_run_rewards")
    rows = [{"data_source": "my_data", "prompt": [{"role": "user", "content": f"{i} + 2 ="}],
             "reward_model": {"ground_truth": "5"}, "extra_info": {"k": 1, "row": i}} for i in range(8)]  # fmt: skip
    data = tmp_path / "train.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    fns = f"[{m}.odd_length,{m}.only_even_rows,{m}.progress]"
    cfg = _cfg(tiny_model_dir, tmp_path / "run", 2, "checkpoint.every=0", f"data.train_files=[{data}]",
               f"data.val_files=[{data}]", "reward.verifier=trl_function",
               f"reward.options.trl_function.functions={fns}", "reward.options.trl_function.weights=[1.0,2.0,0.0]",
               "reward.options.trl_function.correctness=odd_length")  # fmt: skip
    hist = train(cfg, log=lambda *a: None)["history"]
    rollouts = [json.loads(x) for x in (tmp_path / "run" / "rollouts.jsonl").read_text().splitlines()]
    done = [c for r in rollouts for c in r["completions"]]
    assert len(done) == 2 * 4 * 4  # steps x logged prompts x samples
    for r in rollouts:
        even = int(r["prompt"].split()[0]) % 2 == 0
        for c in r["completions"]:
            odd = 1.0 if len(c["text"]) % 2 else 0.25
            done_share = (r["step"] - 1) / 2  # the steps done before this one's rollouts, of train.steps
            assert c["functions"] == {"odd_length": odd, "only_even_rows": 0.5 if even else None,
                                      "progress": done_share}  # fmt: skip
            assert c["reward"] == odd + (1.0 if even else 0.0)  # 1 x odd_length + 2 x only_even_rows
    steps = [h for h in hist if "reward/mean" in h]
    assert len(steps) == 2 and all(h.get("verifier/error_rate", 0.0) == 0.0 for h in steps)
    for h in steps:  # each function's mean over the samples it applies to
        assert h["reward/function/only_even_rows/mean"] == 0.5
        assert h["reward/function/only_even_rows/count"] < h["reward/function/odd_length/count"]
        assert 0.25 <= h["reward/function/odd_length/mean"] <= 1.0


def test_gdpo_normalises_each_trl_function_on_its_own(tiny_model_dir, tmp_path, user_module, monkeypatch):
    """algo.adv_estimator=gdpo (TRL's normalize_then_sum) with reward.verifier=trl_function: the trainer's terms
    are the functions, one column each with its weight, None (a function that does not apply) as NaN."""
    import math

    import reasonrl.trainer.loop as loop

    seen = []

    def recording(groups, weights, parts=None):
        out = term_scores(groups, weights, parts)
        seen.append(out)
        return out

    from reasonrl.trainer.batching import term_scores

    monkeypatch.setattr(loop, "term_scores", recording)
    m = user_module(REWARDS, "trl_gdpo_rewards")
    rows = [{"data_source": "my_data", "prompt": [{"role": "user", "content": f"{i} + 2 ="}],
             "reward_model": {"ground_truth": "5"}, "extra_info": {"k": 1, "row": i}} for i in range(8)]  # fmt: skip
    data = tmp_path / "train.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    cfg = _cfg(tiny_model_dir, tmp_path / "run", 1, "checkpoint.every=0", f"data.train_files=[{data}]",
               f"data.val_files=[{data}]", "reward.verifier=trl_function", "algo.adv_estimator=gdpo",
               f"reward.options.trl_function.functions=[{m}.odd_length,{m}.only_even_rows]",
               "reward.options.trl_function.weights=[1.0,2.0]")  # fmt: skip
    hist = train(cfg, log=lambda *a: None)["history"]
    ((terms, weights),) = seen
    assert weights == (1.0, 2.0) and terms.shape[1] == 2
    assert set(terms[:, 0].tolist()) <= {1.0, 0.25}
    nan = [math.isnan(x) for x in terms[:, 1].tolist()]
    assert any(nan) and not all(nan) and set(x for x, n in zip(terms[:, 1].tolist(), nan) if not n) == {0.5}
    assert [h for h in hist if "reward/mean" in h]
