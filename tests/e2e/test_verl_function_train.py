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


def test_eval_and_passrate_score_data_files_with_a_verl_function(tiny_model_dir, tmp_path, capsys):
    """`--verifier verl_function --verifier-option verl_function.path=F` on `reasonrl eval --data` and
    `reasonrl data passrate`: rows whose data_source routes nowhere are scored by the function."""
    from reasonrl.cli import main as cli

    fn = tmp_path / "reward_fn.py"
    fn.write_text("def compute_score(data_source, solution_str, ground_truth, extra_info=None):\n"
                  "    return {'score': 0.25, 'acc': extra_info['k'] == 1}\n")  # fmt: skip
    rows = [{"data_source": "my_data", "prompt": [{"role": "user", "content": f"{i} + 2 ="}],
             "reward_model": {"ground_truth": "5"}, "extra_info": {"k": i % 2}} for i in range(4)]  # fmt: skip
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    route = ["--verifier", "verl_function", "--verifier-option", f"verl_function.path={fn}"]
    assert cli.main(["eval", tiny_model_dir, "--data", str(data), "--max-new-tokens", "4", *route]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert (out["problems"], out["mean_score"], out["verifier_errors"]) == (4, 0.5, 0.0)  # acc: rows 1 and 3
    assert cli.main(["eval", tiny_model_dir, "--data", str(data), "--max-new-tokens", "4"]) == 2  # unroutable
    assert "no verifier for data_source 'my_data'" in capsys.readouterr().err
    rated = tmp_path / "rated.jsonl"
    argv = ["data", "passrate", str(data), "--model", tiny_model_dir, "--out", str(rated), "--n", "2",
            "--max-new-tokens", "4", "--quiet", *route]  # fmt: skip
    assert cli.main(argv) == 0
    rates = [json.loads(x) for x in rated.read_text().splitlines()]
    column = next(k for k in rates[0] if k.endswith("_pass_rate"))
    assert [r[column] for r in rates] == [0.0, 1.0, 0.0, 1.0]  # acc, not the 0.25 score, decides "solved"
