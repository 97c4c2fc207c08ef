"""The cost of tool calls (`rollout.tools`): programs per second through the tool loop's sandbox runs
(`ToolRolloutEngine._run`: forked children of long-lived sandboxed drivers, `rollout.tools.workers` at a
time) against a fresh sandbox per program (bare `run_python`, one after the other), and one whole round of the loop (find the call, cut the segment, run, tokenize the output, resume)
for `--samples` samples with an engine that costs nothing, so what is left is the loop's own work and
the sandbox. Ends with one JSON line.

    python bench/tool_calls.py [--programs 32] [--samples 64] [--workers 1,2,4,8]
"""

from __future__ import annotations

import argparse
import json
import time


class _Instant:
    """An engine whose segments cost nothing: the first is a call, the one after the output the answer."""

    def __init__(self, tok):
        self.tok = tok

    def generate(self, prompts, params):
        from reasonrl.types import Completion

        out = []
        for p in prompts:
            text = "So 42." if "```output" in self.tok.decode(p) else "```python\nprint(6*7)\n```"
            ids = self.tok(text, add_special_tokens=False)["input_ids"]
            out.append([Completion(ids, self.tok.decode(ids), [0.0] * len(ids)) for _ in range(params.n)])
        return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--programs", type=int, default=32)
    ap.add_argument("--samples", type=int, default=64)
    ap.add_argument("--workers", default="1,2,4,8")
    args = ap.parse_args()
    from reasonrl.config import ToolsConfig
    from reasonrl.models.tiny import build_tokenizer
    from reasonrl.rewards.sandbox import run_python
    from reasonrl.rollout.base import SamplingParams
    from reasonrl.rollout.tools import ToolRolloutEngine, cell_program

    programs = [cell_program(["x = 6", f"print(x * {i})"]) for i in range(args.programs)]
    run_python("print(1)")  # the sandbox probed once (bwrap's check), outside the timings
    ToolRolloutEngine(None, None, ToolsConfig(enabled=True))._run(programs[:1])  # the drivers' first start
    t = time.perf_counter()
    for p in programs:
        run_python(p, timeout_s=5.0)
    bare = args.programs / (time.perf_counter() - t)
    print(
        f"a fresh sandbox each (run_python), one after the other: {bare:.1f} programs/s ({1000 / bare:.0f} ms each)"
    )
    figures = {"bare_programs_per_s": round(bare, 1)}
    for w in (int(x) for x in args.workers.split(",")):
        engine = ToolRolloutEngine(None, None, ToolsConfig(enabled=True, workers=w))
        engine._run(programs[: 2 * w])  # w drivers started before the timing
        t = time.perf_counter()
        engine._run(programs)
        rate = args.programs / (time.perf_counter() - t)
        figures[f"workers_{w}_programs_per_s"] = round(rate, 1)
        print(f"tool loop, {w} at a time: {rate:.1f} programs/s ({rate / bare:.2f}x a fresh sandbox each)")
    tok = build_tokenizer(["```python\nprint(6*7)\n```\n```output\n42\n```\nSo 42. Q"], 200)
    engine = ToolRolloutEngine(_Instant(tok), tok, ToolsConfig(enabled=True))
    prompt = tok("Q", add_special_tokens=False)["input_ids"]
    t = time.perf_counter()
    groups = engine.generate([prompt] * args.samples, SamplingParams(n=1, max_new_tokens=64))
    loop = time.perf_counter() - t
    assert all(c.tool_calls == ("success",) for g in groups for c in g)
    t = time.perf_counter()
    engine._run([cell_program(["print(6*7)"])] * args.samples)
    sandbox = time.perf_counter() - t
    print(f"one round for {args.samples} samples: {loop:.2f} s, of which the sandbox {sandbox:.2f} s "
          f"(the loop's own work {max(loop - sandbox, 0.0) / args.samples * 1000:.1f} ms a sample)")  # fmt: skip
    figures.update(round_s=round(loop, 3), round_sandbox_s=round(sandbox, 3), samples=args.samples)
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
