"""The viewer page in a real headless browser (Debian's chromium + chromium-driver through Selenium):
curves drawn for both runs, a searched rollout group shown with its completions side by side, eval
tables, no console errors; screenshots saved as test artifacts (test-artifacts/viewer/, or
$REASONRL_TEST_ARTIFACTS). Also the page on a real training run's files.

`make test` installs chromium where it can (root with apt); without it these tests skip, saying so."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from reasonrl.viewer.headless import chromium_driver, missing, wait_ready
from reasonrl.viewer.server import Viewer
from reasonrl.viewer.synthetic import write_run

_problem = missing()
if _problem:
    pytest.skip(f"no headless browser here: install {_problem}", allow_module_level=True)

ARTIFACTS = (
    Path(os.environ.get("REASONRL_TEST_ARTIFACTS") or Path(__file__).parents[2] / "test-artifacts") / "viewer"
)


@pytest.fixture(scope="module")
def driver():
    d = chromium_driver()
    yield d
    d.quit()


def _shot(driver, name: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    assert driver.save_screenshot(str(path)) and path.stat().st_size > 10_000
    return path


def _errors(driver) -> list[str]:
    return [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]


def test_curves_search_and_evals_in_a_browser(driver, tmp_path):
    runs = tmp_path / "runs"
    write_run(runs / "alpha", steps=30, groups_per_step=4, n=4, seed=0)
    write_run(runs / "beta", steps=25, groups_per_step=4, n=4, seed=1, offset=0.1)
    by = "css selector"
    with Viewer([runs]) as v:
        driver.get(v.url)
        wait_ready(driver)
        panels = driver.find_elements(by, "#curves .panel")
        keys = [p.get_attribute("data-key") for p in panels]
        assert keys[:3] == ["reward/accuracy", "reward/mean", "eval/accuracy"]
        assert {
            "actor/entropy",
            "rollout/response_length",
            "verifier/batch_seconds",
            "perf/step_seconds",
        } <= set(keys)
        # every chart has a canvas and one legend entry per run, both runs overlaid
        for p in panels:
            assert p.find_element(by, "canvas").size["width"] > 300
            assert [s.text for s in p.find_elements(by, ".u-legend .u-series .u-label")][1:] == [
                "alpha",
                "beta",
            ]
        _shot(driver, "curves")
        driver.find_element(by, "#runs input").click()  # hide alpha: its series leave every chart
        labels = [s.text for s in driver.find_elements(by, "#curves .panel:first-child .u-legend .u-label")]
        assert labels[1:] == ["beta"]

        driver.find_element(by, "[data-tab=rollouts]").click()
        _wait_text(driver, "#rollout-count", "120 groups match")
        box = driver.find_element(by, "#rollout-search")
        box.send_keys("What is 7 + 2")
        box.submit()
        _wait_text(driver, "#rollout-count", "1 groups match")
        group = driver.find_element(by, "#rollout-list .group.open")
        assert (
            group.get_attribute("data-step") == "7" and "What is 7 + 2" in group.find_element(by, "mark").text
        )
        cards = group.find_elements(by, ".completion")
        assert len(cards) == 4 and all(c.is_displayed() for c in cards)
        ys = {c.location["y"] for c in cards}
        assert len(ys) == 1  # side by side, one row
        assert [c.find_element(by, "dd.reward").text for c in cards] == ["1", "0", "1", "0"]
        assert [c.find_element(by, "dd.extracted").text for c in cards] == ["9", "10", "9", "10"]
        assert cards[1].find_element(by, "dd.reason").text == "wrong answer"
        _shot(driver, "rollouts_search")

        driver.find_element(by, "[data-tab=evals]").click()
        tables = driver.find_elements(by, "#evals table")
        assert len(tables) == 4  # per run: the benchmark table and the macro average
        first = tables[0].find_elements(by, "tr")
        assert [td.text for td in first[1].find_elements(by, "td")][:4] == ["gsm8k", "50", "4", "0.4200"]
        _shot(driver, "evals")
        assert _errors(driver) == []


def _wait_text(driver, sel: str, text: str, timeout_s: float = 10) -> None:
    import time

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if text in driver.find_element("css selector", sel).text:
            return
        time.sleep(0.05)
    raise AssertionError(f"{sel} never showed {text!r}: {driver.find_element('css selector', sel).text!r}")


def test_a_real_training_run_in_the_browser(driver, tiny_model_dir, tmp_path):
    """The files a real run writes (not the synthetic ones) render: curves and rollout groups."""
    import json

    from test_train_loop import _cfg

    from reasonrl.trainer.loop import train

    run = tmp_path / "run"
    train(_cfg(tiny_model_dir, run, 2, "log.rollouts_per_step=3"), log=lambda *a: None)
    groups = [json.loads(x) for x in (run / "rollouts.jsonl").read_text().splitlines()]
    assert len(groups) == 6
    with Viewer([run]) as v:
        driver.get(v.url)
        wait_ready(driver)
        keys = [p.get_attribute("data-key") for p in driver.find_elements("css selector", "#curves .panel")]
        assert "reward/mean" in keys and "actor/entropy" in keys
        driver.find_element("css selector", "[data-tab=rollouts]").click()
        _wait_text(driver, "#rollout-count", "6 groups match")
        first = driver.find_element("css selector", "#rollout-list .group")
        first.find_element("css selector", ".head").click()
        n = len(groups[0]["completions"])
        assert len(first.find_elements("css selector", ".completion")) == n
        _shot(driver, "real_run_rollouts")
        assert _errors(driver) == []


def test_live_mode_picks_up_new_steps(driver, tmp_path):
    """With "live" on, steps a running trainer appends show up without a reload (polled every 5 s)."""
    import json
    import time

    run = write_run(tmp_path / "live", steps=5, groups_per_step=2, n=2)
    with Viewer([run]) as v:
        driver.get(v.url)
        wait_ready(driver)
        assert driver.execute_script("return state.metrics[0].steps.length") == 5
        driver.find_element("id", "live").click()
        with open(run / "metrics.jsonl", "a") as f:
            for s in (6, 7):
                f.write(json.dumps({"step": s, "reward/mean": 0.9, "reward/accuracy": 0.9}) + "\n")
        deadline = time.monotonic() + 12
        while (
            driver.execute_script("return state.metrics[0].steps.length") != 7 and time.monotonic() < deadline
        ):
            time.sleep(0.2)
        assert driver.execute_script("return state.metrics[0].steps.slice(-2)") == [6, 7]
        assert driver.find_elements("css selector", "#curves .panel")  # redrawn, not emptied
        assert _errors(driver) == []


def test_model_text_is_shown_as_text_never_run_as_markup(driver, tmp_path):
    """A policy writes the completions, extracted answers and reasons the page shows: markup in them
    (an image whose error handler runs script, a script tag) appears as its characters, and no element
    or script of it ever reaches the page."""
    import json

    run = write_run(tmp_path / "hostile", steps=2, groups_per_step=1, n=1)
    attack = '<img src=x onerror="window.pwned=1"><script>window.pwned=2</script><b>bold</b>'
    comp = {"text": f"zebracorn {attack}", "reward": 1.0, "reason": attack, "extracted": attack, "tokens": 9,
            "finish_reason": "stop"}  # fmt: skip
    with open(run / "rollouts.jsonl", "a", encoding="utf-8") as f:
        f.write(json.dumps({"step": 2, "uid": attack, "data_source": "math", "prompt": f"zebracorn? {attack}",
                            "ground_truth": attack, "rewards": [1.0], "completions": [comp]}) + "\n")  # fmt: skip
    by = "css selector"
    with Viewer([run]) as v:
        driver.get(v.url)
        wait_ready(driver)
        driver.find_element(by, "[data-tab=rollouts]").click()
        box = driver.find_element(by, "#rollout-search")
        box.send_keys("zebracorn")
        box.submit()
        _wait_text(driver, "#rollout-count", "1 groups match")
        group = driver.find_element(by, "#rollout-list .group.open")
        assert group.find_elements(by, "img, script, b") == []
        card = group.find_element(by, ".completion")
        assert attack in card.find_element(by, ".text").text
        assert card.find_element(by, "dd.extracted").text == attack
        assert card.find_element(by, "dd.reason").text == attack
        assert attack in group.find_element(by, ".prompt").text
        assert driver.execute_script("return window.pwned === undefined") is True
        assert _errors(driver) == []


def test_a_groups_voted_label_is_shown(driver, tmp_path):
    """reward.pseudo_label: the group card shows the label its samples voted (or that nobody answered)."""
    import json

    run = write_run(tmp_path / "ttrl", steps=1, groups_per_step=2, n=2)
    rows = [json.loads(x) for x in (run / "rollouts.jsonl").read_text().splitlines()]
    rows[0]["pseudo_label"], rows[1]["pseudo_label"] = "12", None
    (run / "rollouts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    with Viewer([run]) as v:
        driver.get(v.url)
        wait_ready(driver)
        driver.find_element("css selector", "[data-tab=rollouts]").click()
        _wait_text(driver, "#rollout-count", "2 groups match")
        for row, shown in zip(rows, ("voted label: 12", "voted label: none (nobody answered)")):
            box = driver.find_element("css selector", "#rollout-search")
            box.clear()
            box.send_keys(row["prompt"])
            box.submit()
            _wait_text(driver, "#rollout-count", "1 groups match")
            _wait_text(driver, "#rollout-list .group.open", shown)
        assert _errors(driver) == []
