"""A run scored by a verl reward function file (`reward.verifier: verl_function`): its verifier workers
load the file by path and every step's reward is what the function returned."""

from __future__ import annotations

import json

from test_train_loop import _cfg

from reasonrl.trainer.loop import train


def test_a_run_trains_on_the_rewards_of_a_verl_reward_function(tiny_model_dir, tmp_path):
    fn = tmp_path / "reward_fn.py"
    # odd-length completions earn 1, even ones 0.25: rewards vary, so the run has something to learn from
    fn.write_text("def compute_score(data_source, solution_str, ground_truth, extra_info=None):\n"
                  "    assert data_source == 'my_data' and ground_truth == '5' and extra_info['k'] == 1\n"
                  "    return 1.0 if len(solution_str) % 2 else 0.25\n")  # fmt: skip
    rows = [{"data_source": "my_data", "prompt": [{"role": "user", "content": f"{i} + 2 ="}],
             "reward_model": {"ground_truth": "5"}, "extra_info": {"k": 1}} for i in range(8)]  # fmt: skip
    data = tmp_path / "train.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    cfg = _cfg(tiny_model_dir, tmp_path / "run", 2, "checkpoint.every=0", f"data.train_files=[{data}]",
               f"data.val_files=[{data}]", "reward.verifier=verl_function",
               f"reward.options.verl_function.path={fn}")  # fmt: skip
    hist = train(cfg, log=lambda *a: None)["history"]
    rollouts = [json.loads(x) for x in (tmp_path / "run" / "rollouts.jsonl").read_text().splitlines()]
    done = [c for r in rollouts for c in r["completions"]]
    assert len(done) == 2 * 4 * 4  # steps x logged prompts x samples
    assert all(c["reward"] == (1.0 if len(c["text"]) % 2 else 0.25) for c in done)
    assert {c["reason"] for c in done} <= {"correct", "partial"} and len({c["reason"] for c in done}) == 2
    steps = [h for h in hist if "reward/mean" in h]
    assert len(steps) == 2 and all(0.25 <= h["reward/mean"] <= 1.0 for h in steps)
    assert all(h.get("verifier/error_rate", 0.0) == 0.0 for h in steps)  # the asserts in the function held
