"""Viewer render time (goal: a run with 1000 steps and 10k rollout groups renders in under 2 s) in a
real headless chromium, cold (the server reads the files on the first request) and warm. Side by side
in the same run: the same page on a 20-step, 80-group run, so the ratio shows what size costs.

    .venv/bin/python bench/viewer_render.py [--steps 1000] [--groups-per-step 10] [--n 4] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
import urllib.request
from pathlib import Path


def _page_ms(driver, url: str) -> float:
    from reasonrl.viewer.headless import wait_ready

    driver.get("about:blank")
    driver.get(url)
    return wait_ready(driver, timeout_s=60)


def _search_ms(driver, text: str) -> float:
    t0 = time.perf_counter()
    driver.execute_script(
        "document.querySelector('[data-tab=rollouts]').click();"
        "const b = document.querySelector('#rollout-search'); b.value = arguments[0];"
        "document.querySelector('#rollout-form').requestSubmit();", text)  # fmt: skip
    while "groups match" not in driver.find_element("id", "rollout-count").text or \
            driver.find_element("id", "rollout-count").text.startswith("10000"):  # fmt: skip
        time.sleep(0.005)
    return (time.perf_counter() - t0) * 1000


def measure(run: Path, driver, repeats: int) -> dict:
    from reasonrl.viewer.server import Viewer

    with Viewer([run]) as v:
        cold = _page_ms(driver, v.url)
        warm = sorted(_page_ms(driver, v.url) for _ in range(repeats))[repeats // 2]
        t0 = time.perf_counter()
        urllib.request.urlopen(v.url + "api/rollouts?run=0&q=what+is+500+%2B+3").read()
        api_search = (time.perf_counter() - t0) * 1000
        search = _search_ms(driver, "What is 500 + 3")
    return {"cold_ms": round(cold), "warm_ms": round(warm), "api_search_ms": round(api_search, 1),
            "page_search_ms": round(search, 1)}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--groups-per-step", type=int, default=10)
    ap.add_argument("--n", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    from reasonrl.viewer.headless import chromium_driver
    from reasonrl.viewer.synthetic import write_run

    with tempfile.TemporaryDirectory() as tmp:
        big = write_run(Path(tmp) / "big", steps=args.steps, groups_per_step=args.groups_per_step, n=args.n)
        small = write_run(Path(tmp) / "small", steps=20, groups_per_step=4, n=args.n)
        mb = sum(f.stat().st_size for f in big.iterdir() if f.is_file()) / 2**20
        driver = chromium_driver()
        try:
            s = measure(small, driver, args.repeats)
            b = measure(big, driver, args.repeats)
        finally:
            driver.quit()
    print(json.dumps({
        "big_run": {"steps": args.steps, "groups": args.steps * args.groups_per_step,
                    "completions": args.steps * args.groups_per_step * args.n, "files_mb": round(mb, 1), **b},
        "small_run": {"steps": 20, "groups": 80, **s},
        "ratio_cold_big_vs_small": round(b["cold_ms"] / max(s["cold_ms"], 1), 2),
        "goal_under_2s": b["cold_ms"] < 2000,
    }, indent=1))  # fmt: skip


if __name__ == "__main__":
    main()
