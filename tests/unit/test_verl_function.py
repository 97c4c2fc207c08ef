"""A verl reward function file used as it is (`verl_function`, `reward.verifier`): called with verl's
arguments in the verifier workers, its return values read as verl reads them, its mistakes named
before any work, and rows of the run's files routed to it (generated tasks and a row's own verifier
keep theirs)."""

from __future__ import annotations

import json
import textwrap

import pytest

from reasonrl.config import ConfigError, load_config
from reasonrl.rewards.routing import with_verifier
from reasonrl.rewards.runner import RewardRunner
from reasonrl.rewards.verifiers.verl_function import read_return
from reasonrl.types import Problem

# DAPO's shape: +1 / -1, "acc" and "pred"; and a plain number with a keyword argument (verl's reward_kwargs)
VERL_FILE = textwrap.dedent(
    """
    import re

    CALLS = []

    def compute_score(data_source, solution_str, ground_truth, extra_info=None):
        m = re.search(r"Answer: *(\\S+)", solution_str)
        pred = m.group(1) if m else None
        ok = pred == str(ground_truth) and extra_info.get("split") == "train"
        near = not ok and pred is not None and pred.startswith(str(ground_truth))  # partial credit
        return {"score": 1.0 if ok else 0.5 if near else -1.0, "acc": ok, "pred": pred, "source": data_source}

    def plain(data_source, solution_str, ground_truth, extra_info=None, bonus=0.0):
        return float(solution_str.strip() == ground_truth) + bonus

    def broken(data_source, solution_str, ground_truth, extra_info=None):
        return {"score": float("nan")} if "nan" in solution_str else "yes"

    def too_few(solution_str):
        return 1.0
    """
)


@pytest.fixture
def verl_file(tmp_path):
    path = tmp_path / "my_reward.py"
    path.write_text(VERL_FILE)
    return str(path)


def _problem(gt="42", source="my_data"):
    return Problem([{"role": "user", "content": "q"}], gt, source, "math", {"split": "train"})


def test_the_function_is_called_verls_way_in_the_workers_and_read_as_verl_reads_it(verl_file):
    problems = [_problem(), _problem(), _problem("7"), _problem()]
    routed = with_verifier(problems, "verl_function")
    with RewardRunner(workers=1, options={"verl_function": {"path": verl_file}}) as runner:
        results, _ = runner.score(["so\nAnswer: 42", "Answer: 41", "no answer", "Answer: 420"], routed)
    assert [r.score for r in results] == [1.0, -1.0, -1.0, 0.5]
    assert [r.correctness for r in results] == [1.0, 0.0, 0.0, 0.0]  # its "acc", not the score clipped
    assert [r.extracted for r in results] == ["42", "41", None, "420"]
    assert [r.reason for r in results] == ["correct", "wrong", "wrong", "wrong"]
    assert results[0].info["source"] == "my_data"  # other keys kept
    options = {"verl_function": {"path": verl_file, "name": "plain", "kwargs": {"bonus": 0.25}}}
    with RewardRunner(workers=1, options=options) as runner:
        results, _ = runner.score(["42", "43"], routed[:2])
    assert [r.score for r in results] == [1.25, 0.25]
    assert [r.correctness for r in results] == [1.0, 0.25]  # no "acc": the score, clipped to [0, 1]
    assert [r.reason for r in results] == ["correct", "partial"]


def test_return_values_verl_would_not_read_are_errors_not_scores(verl_file):
    with RewardRunner(workers=1, options={"verl_function": {"path": verl_file, "name": "broken"}}) as runner:
        results, _ = runner.score(["x", "nan"], with_verifier([_problem(), _problem()], "verl_function"))
    assert [r.score for r in results] == [0.0, 0.0]
    assert "is 'yes', not a finite number" in results[0].reason and results[0].reason.startswith("error")
    assert "'score' is nan" in results[1].reason
    assert read_return(True).score == 1.0  # a bool is 1 / 0, as in verl's reward tensor
    with pytest.raises(ValueError, match=r"without 'score' \(keys: \['acc'\]\)"):
        read_return({"acc": True})


def test_mistakes_in_the_file_or_the_options_stop_the_recipe_before_any_work(verl_file, tmp_path):
    def cfg(*extra):
        return load_config(None, ["reward.verifier=verl_function", *extra])

    with pytest.raises(ConfigError, match=r"reward.verifier verl_function: option 'path' .* is required"):
        cfg()
    with pytest.raises(ConfigError, match=r"path '.*nowhere.py': no such file"):
        cfg(f"reward.options.verl_function.path={tmp_path / 'nowhere.py'}")
    with pytest.raises(ConfigError, match=r"defines no function 'score_it'"):
        cfg(f"reward.options.verl_function.path={verl_file}", "reward.options.verl_function.name=score_it")
    with pytest.raises(ConfigError, match=r"too_few in .* cannot be called as verl calls it"):
        cfg(f"reward.options.verl_function.path={verl_file}", "reward.options.verl_function.name=too_few")
    with pytest.raises(
        ConfigError, match=r"cannot be called as verl calls it.*unexpected keyword argument 'bonus'"
    ):
        cfg(
            f"reward.options.verl_function.path={verl_file}", "reward.options.verl_function.kwargs={bonus: 1}"
        )
    bad = tmp_path / "bad.py"
    bad.write_text("import not_a_module_anywhere\n")
    with pytest.raises(ConfigError, match=r"importing it failed \(ModuleNotFoundError"):
        cfg(f"reward.options.verl_function.path={bad}")
    with pytest.raises(ConfigError, match=r"reward.verifier='nope' is not a valid choice"):
        load_config(None, ["reward.verifier=nope"])
    assert cfg(f"reward.options.verl_function.path={verl_file}").reward.verifier == "verl_function"


def test_rows_of_the_files_go_to_it_generated_tasks_and_a_rows_own_verifier_keep_theirs(verl_file, tmp_path):
    from reasonrl.trainer.setup import load_data

    rows = [
        _problem().to_row(),
        {**_problem().to_row(), "extra_info": {"verifier": "math", "split": "train"}},
    ]
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    route = ["reward.verifier=verl_function", f"reward.options.verl_function.path={verl_file}"]
    train, val = load_data(
        load_config(None, [*route, f"data.train_files=[{path}]", f"data.val_files=[{path}]"])
    )
    assert [p.verifier for p in train] == [p.verifier for p in val] == ["verl_function", "math"]
    train, val = load_data(load_config(None, [*route, "data.train_size=10", "data.val_size=4", "val.size=4"]))
    assert {p.verifier for p in train + val} == {None}  # the built-in task's rows route by their data_source
    with pytest.raises(ValueError, match=r"no verifier for data_source 'my_data'"):  # without it: unroutable
        load_data(load_config(None, [f"data.train_files=[{path}]"]))


def test_what_a_function_returns_read_as_verl_reads_it():
    import numpy as np
    import torch

    for value, score, reason in ((np.float32(0.5), 0.5, "partial"), (torch.tensor(1.0), 1.0, "correct"),
                                 (0, 0.0, "wrong"), (-1.0, -1.0, "wrong"), (False, 0.0, "wrong")):  # fmt: skip
        got = read_return(value)
        assert (got.score, got.reason, "correctness" in got.info) == (score, reason, False), value
    # a numeric "acc" counts as verl's boolean; "score", "acc" and "pred" are read, not copied into info
    for acc, solved in (
        (1.0, True),
        (0, False),
        (0.3, True),
        (np.bool_(True), True),
        ("yes", True),
        ("", False),
    ):
        got = read_return({"score": 0.5, "acc": acc, "pred": 7, "note": "n"})
        assert (got.info["correctness"], got.reason) == ((1.0, "correct") if solved else (0.0, "wrong")), acc
        assert got.extracted == "7" and got.info["note"] == "n"
        assert not {"score", "acc", "pred"} & set(got.info), got.info
    with pytest.raises(ValueError, match=r"^the function's return value is 'x', not a finite number"):
        read_return("x")
    with pytest.raises(ValueError, match=r"^its 'score' is inf, not a finite number"):
        read_return({"score": float("inf")})
