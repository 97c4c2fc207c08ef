"""The multi-GPU recipes and the Slurm template: each recipe loads and validates as written, its batch
knobs divide over the ranks it is written for, and the template is valid bash that launches torchrun
with the reasonrl trainer."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from reasonrl.config import load_config

DIR = Path(__file__).parents[2] / "recipes" / "distributed"
RANKS = {"gpu1_qwen05b": 1, "gpu1_search_r1": 1, "gpu1_sft_qwen05b": 1, "gpu1_tir_math": 1, "gpu8_qwen7b": 8}


@pytest.mark.parametrize("name", sorted(RANKS))
def test_recipe_is_valid_for_its_ranks(name):
    cfg = load_config(DIR / f"{name}.yaml")
    ranks, t = RANKS[name], cfg.train
    prompts = t.global_batch // cfg.rollout.n
    assert t.global_batch % cfg.rollout.n == 0 and prompts % ranks == 0 and t.mini_batch % ranks == 0
    assert (t.engine == "fsdp2") == (ranks > 1) and cfg.model.dtype == "bfloat16"
    assert (t.mini_batch // ranks) % t.micro_batch == 0  # whole micro-batches per rank


def test_slurm_template_is_valid_bash_and_launches_torchrun():
    script = DIR / "slurm_multinode.sh"
    assert subprocess.run(["bash", "-n", str(script)], capture_output=True).returncode == 0
    text = script.read_text()
    assert "torchrun --nnodes" in text and "-m reasonrl.cli.main train" in text and "--rdzv-endpoint" in text
