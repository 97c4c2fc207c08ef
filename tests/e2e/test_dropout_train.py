"""A model whose config has dropout trains with it off (model.disable_dropout, the default): the update's
forward is the sampler's to float precision, where with dropout live the gap is large."""

from __future__ import annotations

import json
import shutil

from test_train_loop import _cfg

from reasonrl.trainer.loop import train

QUIET = lambda *a: None  # noqa: E731


def test_dropout_is_off_for_training_unless_asked(tiny_model_dir, tmp_path):
    model = tmp_path / "dropout_model"
    shutil.copytree(tiny_model_dir, model)
    config = json.loads((model / "config.json").read_text())
    config["attention_dropout"] = 0.5
    (model / "config.json").write_text(json.dumps(config))
    # a learning rate too small to move the policy: each update's ratio to the old (no-grad, eval-mode)
    # log-probs is then 1 up to float noise, unless the training forward drops attention weights
    opts = ("algo.entropy_coef=0.01", "checkpoint.every=0", "train.lr=1e-12")
    lines = []
    off = train(_cfg(str(model), tmp_path / "off", 1, *opts), log=lines.append)["history"]
    live = train(_cfg(str(model), tmp_path / "live", 1, *opts, "model.disable_dropout=false"), log=QUIET)[
        "history"
    ]
    assert off[1]["actor/approx_kl"] < 1e-9 and abs(off[1]["actor/ratio_max"] - 1) < 1e-5
    assert live[1]["actor/approx_kl"] > 1e-5 and live[1]["actor/ratio_max"] > 1.01
    assert "model.disable_dropout: 2 dropout rate(s) above 0 set to 0 for training" in lines
