"""SFT on rows with no checkable answer (verifier "none", `data prepare sft --option answer=none`): they
train and validate by `eval/nll`; validation's accuracy comes from the rows that can be checked, and only
from those; every use that scores (RL, `reasonrl eval`, keep_best on an accuracy never measured) refuses
them before the model loads."""

from __future__ import annotations

import json

import pytest
from test_sft import SFT
from test_train_loop import _cfg

import reasonrl.cli.main as cli
from reasonrl.config import ConfigError
from reasonrl.data.prepare import prepare
from reasonrl.data.tasks import generate
from reasonrl.errors import InputError
from reasonrl.trainer.loop import train

pytestmark = pytest.mark.timeout(600)
PLAIN = [x for x in SFT if not x.startswith("data.response_key")]  # the converter's extra_info.response


def _chats(tmp_path, name: str, seed: int, options: dict) -> str:
    rows = [{"messages": [{"role": "user", "content": p.user_text},
                          {"role": "assistant", "content": p.extra_info["solution"]}], "answer": p.ground_truth}
            for p in generate("arithmetic", 16, seed=seed, difficulty=2, split="train")]  # fmt: skip
    src = tmp_path / f"{name}.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    prepare(
        "sft", [str(src)], tmp_path / f"{name}.parquet", {"data_source": "reasonrl/arithmetic", **options}
    )
    return str(tmp_path / f"{name}.parquet")


def test_they_train_and_validation_scores_only_the_checkable_rows(
    tiny_model_dir, tmp_path, monkeypatch, capsys
):
    import reasonrl.trainer.setup as setup

    free, checked = _chats(tmp_path, "free", 1, {"answer": "none"}), _chats(tmp_path, "checked", 2, {})
    scored, real = [], setup.evaluate
    monkeypatch.setattr(setup, "evaluate", lambda engine, tok, problems, *a, **k: scored.append(problems)
                        or real(engine, tok, problems, *a, **k))  # fmt: skip
    lines = []
    out = train(_cfg(tiny_model_dir, tmp_path / "run", 4, *PLAIN, f"data.train_files=[{free}]",
                     f"data.val_files=[{free},{checked}]", "val.size=32", "train.lr=3e-3"), log=lines.append)  # fmt: skip
    hist = out["history"]
    assert hist[-1]["eval/nll"] < hist[0]["eval/nll"] and hist[-1]["eval/nll_tokens"] > 100  # every row's
    assert all(r["loss/nll"] > 0 for r in hist[1:])
    # the accuracy is over the 16 checkable rows, with no verifier error from the others
    assert scored and all(len(ps) == 16 and all(p.verifier is None for p in ps) for ps in scored)
    assert "eval/accuracy" in hist[-1] and hist[-1]["eval/verifier_errors"] == 0.0
    assert any("16 of 32 rows have no checkable answer (verifier none)" in x for x in lines), lines
    # validation rows that all lack one (reward.verifier=none: a recipe's files routed there): eval/nll alone
    out = train(_cfg(tiny_model_dir, tmp_path / "run2", 1, *PLAIN, f"data.train_files=[{checked}]",
                     f"data.val_files=[{checked}]", "reward.verifier=none"))  # fmt: skip
    assert "eval/nll" in out["history"][-1] and "eval/accuracy" not in out["history"][-1]
    # `reasonrl eval RUN_DIR` evaluates a run on its own validation rows: the checkable ones, or none at all
    assert cli.main(["eval", str(tmp_path / "run2")]) == 2
    assert "its run's validation rows have no checkable answer" in capsys.readouterr().err
    assert cli.main(["eval", str(tmp_path / "run"), "--out", str(tmp_path / "eval.json")]) == 0
    assert "(16 problems; 16 without a checkable answer left out)" in capsys.readouterr().err


def test_every_use_that_scores_refuses_them_before_the_model_loads(
    tiny_model_dir, tmp_path, monkeypatch, capsys
):
    import reasonrl.trainer.setup as setup

    free = _chats(tmp_path, "free", 1, {"answer": "none"})
    monkeypatch.setattr(setup, "load_model", lambda *a, **k: pytest.fail("the model loaded"))
    files = (f"data.train_files=[{free}]", f"data.val_files=[{free}]")
    with pytest.raises(
        InputError, match=r"^train data row 0: the row has no checkable answer \(verifier 'none'\)"
    ):
        train(_cfg(tiny_model_dir, tmp_path / "rl", 1, *files))  # GRPO would score them
    with pytest.raises(ConfigError, match="reward.verifier='none' routes every row to no verifier"):
        _cfg(tiny_model_dir, tmp_path / "rl2", 1, "reward.verifier=none")  # (an SFT recipe may say so)
    with pytest.raises(
        ConfigError, match="reward.weights: 'none' is the route of rows with no checkable answer"
    ):
        _cfg(tiny_model_dir, tmp_path / "rl3", 1, "reward.weights.none=0.5")
    with pytest.raises(
        InputError, match="checkpoint.keep_best='eval/accuracy': no validation row has a checkable"
    ):
        train(
            _cfg(tiny_model_dir, tmp_path / "best", 1, *PLAIN, *files, "checkpoint.keep_best=eval/accuracy")
        )
    assert cli.main(["eval", tiny_model_dir, "--data", free]) == 2
    assert "eval data row 0: the row has no checkable answer" in capsys.readouterr().err
    out = tmp_path / "rates.parquet"
    assert cli.main(["data", "passrate", free, "--model", tiny_model_dir, "--out", str(out)]) == 2
    assert f"{free} row 0: the row has no checkable answer" in capsys.readouterr().err and not out.exists()
