"""The model card of an exported checkpoint: `README.md` with Hub metadata, what was trained and how,
the training curves (`training_curves.png`, drawn from the run's metrics.jsonl up to the checkpoint's
step), an eval table, the recipe, and provenance from the checkpoint's manifest.

Owns: the card's contents and where they come from: the config and step in the checkpoint's
state.json; metrics.jsonl and eval outputs of the run directory the checkpoint sits in (an eval output
directory named after the checkpoint, e.g. `RUN/eval/step_000100/results.json` from `reasonrl eval RUN
--benchmarks ...`, else the newest one, else the run's own validation metrics at that step).
Does not own: drawing (`trainer.plot`), the results table (`eval.runner.results_markdown`).
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from reasonrl.data.files import write_text

CURVES = "training_curves.png"


def _run_dir(ckpt: Path) -> Path | None:
    return ckpt.parent.parent if ckpt.parent.name == "checkpoints" else None


def _history(run_dir: Path | None, step: int) -> list[dict]:
    path = run_dir / "metrics.jsonl" if run_dir else None
    if path is None or not path.is_file():
        return []
    from reasonrl.trainer.metrics import iter_jsonl

    rows = [r for _, r in iter_jsonl(path) if r is not None]
    return [r for r in rows if isinstance(r.get("step"), int) and r["step"] <= step]


def eval_section(run_dir: Path | None, ckpt_name: str, history: list[dict]) -> str:
    from reasonrl.eval.compare import find_result_files, load_results
    from reasonrl.eval.runner import results_markdown

    files = [f for f in find_result_files(run_dir / "eval") if f.name == "results.json"] if run_dir else []
    if files:
        own = [f for f in files if ckpt_name in f.parts]
        chosen = own[0] if own else max(files, key=lambda f: f.stat().st_mtime)
        note = "" if own else f" (from `{chosen.relative_to(run_dir)}`, not this checkpoint's own eval)"
        return f"Benchmarks (`reasonrl eval --benchmarks`){note}:\n\n" + results_markdown(
            load_results(chosen)
        )
    val = next((r for r in reversed(history) if any(k.startswith("eval/") for k in r)), None)
    if val is None:
        return "No evaluation was run for this checkpoint.\n"
    lines = [
        f"Held-out validation during training (step {val['step']}):",
        "",
        "| metric | value |",
        "|---|---|",
    ]
    lines += [
        f"| {k} | {v:.4f} |" for k, v in sorted(val.items()) if k.startswith("eval/") and isinstance(v, float)
    ]
    return "\n".join(lines) + "\n"


def card_text(ckpt: Path, *, curves: bool, with_optimizer: bool, history: list[dict]) -> str:
    state = json.loads((ckpt / "state.json").read_text()) if (ckpt / "state.json").is_file() else {}
    manifest = json.loads((ckpt / "manifest.json").read_text()) if (ckpt / "manifest.json").is_file() else {}
    cfg = state.get("config") or manifest.get("config") or {}
    step = state.get("step")
    model, algo, train = cfg.get("model", {}), cfg.get("algo", {}), cfg.get("train", {})
    base = str(model.get("path", ""))
    est, loss = algo.get("adv_estimator", "?"), algo.get("policy_loss", "?")
    meta = {"library_name": "transformers", "tags": ["reasonrl", "reinforcement-learning", "rlvr", est, loss]}
    if base.count("/") == 1 and not base.startswith((".", "/", "~")):  # a hub id
        meta["base_model"] = base
    name = cfg.get("name") or ckpt.name
    out = ["---", yaml.safe_dump(meta, sort_keys=False).strip(), "---", "", f"# {name}", ""]
    out.append(f"Trained with reasonrl (reinforcement learning on "
               f"verifiable rewards) from `{base}`: advantage estimator `{est}`, policy loss `{loss}`, "
               f"{step} steps of {train.get('global_batch', '?')} sequences "
               f"({cfg.get('rollout', {}).get('n', '?')} samples per prompt).")  # fmt: skip
    if history:
        last = history[-1]
        keys = [
            k for k in ("reward/mean", "reward/accuracy", "eval/accuracy") if isinstance(last.get(k), float)
        ]
        if keys:
            out.append("At the last step: " + ", ".join(f"{k} {last[k]:.4f}" for k in keys) + ".")
    out += ["", "## Training curves", ""]
    out.append(
        f"![training curves]({CURVES})" if curves else "No metrics.jsonl was found beside the checkpoint."
    )
    out += ["", "## Evaluation", "", eval_section(_run_dir(ckpt), ckpt.name, history).rstrip(), ""]
    out += ["## Recipe", "", "The resolved config (`reasonrl train` takes it as a recipe):", "", "```yaml",
            yaml.safe_dump(cfg, sort_keys=False).rstrip(), "```", ""]  # fmt: skip
    if manifest:
        pk = manifest.get("packages", {})
        git = manifest.get("git") or {}
        out += ["## Provenance", ""]
        out.append(
            "- packages: "
            + ", ".join(f"{k} {v}" for k, v in pk.items() if k in ("reasonrl", "torch", "transformers"))
        )
        if git:
            out.append(
                f"- git revision: `{git.get('revision')}`"
                + (" (uncommitted changes)" if git.get("dirty") else "")
            )
        for d in manifest.get("data_files", []):
            out.append(f"- data: `{Path(d['path']).name}` sha256 `{d.get('sha256', 'missing')}`")
        out.append("- full record: `manifest.json`")
        out.append("")
    if with_optimizer:
        out += ["## Resuming", "", "`training_state/` holds the optimizer, scheduler and RNG states and the checkpoint's "
                "integrity record: copy the top-level model files, then training_state/'s contents (over them), into "
                "`RUN/checkpoints/step_N/` and `reasonrl train RECIPE --resume` continues exactly.", ""]  # fmt: skip
    return "\n".join(out)


def write_card(ckpt: Path, out: Path, with_optimizer: bool = False) -> None:
    state = json.loads((ckpt / "state.json").read_text()) if (ckpt / "state.json").is_file() else {}
    history = _history(_run_dir(ckpt), int(state.get("step", 10**12)))
    curves = False
    if history:
        from reasonrl.trainer.plot import plot_run

        plot_run(history, out / CURVES, title=str((state.get("config") or {}).get("name", "")))
        curves = True
    text = card_text(ckpt, curves=curves, with_optimizer=with_optimizer, history=history)
    write_text(out / "README.md", text)
