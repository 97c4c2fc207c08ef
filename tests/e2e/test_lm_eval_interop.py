"""A reasonrl checkpoint loads in EleutherAI's lm-evaluation-harness (HF backend) and is scored on a
local task (a task YAML over a local jsonl; no network), the way users run their standard suites."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest
from test_train_loop import _cfg

from reasonrl.engines.checkpoint import list_checkpoints
from reasonrl.trainer.loop import train

pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.skipif(importlib.util.find_spec("lm_eval") is None, reason="lm-eval not installed"),
]

RUN = """
import json, sys
from lm_eval import simple_evaluate
from lm_eval.tasks import TaskManager
out = simple_evaluate(model="hf", model_args=f"pretrained={sys.argv[1]},dtype=float32,device=cpu",
                      tasks=["reasonrl_local"], task_manager=TaskManager(include_path=sys.argv[2]), batch_size=4)
print(json.dumps(out["results"]["reasonrl_local"]))
"""


def test_lm_eval_scores_a_reasonrl_checkpoint_on_a_local_task(tiny_model_dir, tmp_path):
    train(_cfg(tiny_model_dir, tmp_path / "run", 2, "log.tensorboard=false"))
    ckpt = list_checkpoints(tmp_path / "run")[-1]
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    rows = [{"question": f"{a} + {b} =", "choices": [str(a + b), str(a + b + 1), str(a + b + 2)], "label": 0}
            for a, b in [(1, 2), (3, 4), (2, 2), (5, 1), (0, 3)]]  # fmt: skip
    (tasks / "local.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tasks / "reasonrl_local.yaml").write_text(
        "task: reasonrl_local\ndataset_path: json\ndataset_kwargs:\n  data_files:\n"
        f"    test: {tasks / 'local.jsonl'}\ntest_split: test\noutput_type: multiple_choice\n"
        'doc_to_text: "{{question}}"\ndoc_to_choice: "{{choices}}"\ndoc_to_target: label\n'
        "metric_list:\n  - metric: acc\n"
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    res = subprocess.run([sys.executable, "-c", RUN, str(ckpt), str(tasks)], capture_output=True, text=True,
                         timeout=240, env=env, cwd=tmp_path)  # fmt: skip
    assert res.returncode == 0, res.stderr[-3000:]
    got = json.loads(res.stdout.strip().splitlines()[-1])
    assert got["sample_len"] == 5
    acc = got["acc,none"]
    assert 0.0 <= acc <= 1.0 and abs(acc * 5 - round(acc * 5)) < 1e-9  # 5 documents scored
