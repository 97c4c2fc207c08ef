"""A headless Chromium for the viewer's browser tests and render benchmark: Debian's `chromium` and
`chromium-driver` (apt) driven by Selenium, with no driver download (Selenium Manager stays offline).

Owns: finding the two binaries and starting the driver; `missing()` says what is not installed.
"""

from __future__ import annotations

import os
import shutil

BROWSERS = ("chromium", "chromium-browser", "google-chrome")
DRIVERS = ("chromedriver",)


def _which(names) -> str | None:
    return next((p for p in map(shutil.which, names) if p), None)


def missing() -> str | None:
    """None when a headless browser can start; else what to install."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "the selenium package (pip install selenium)"
    if _which(BROWSERS) is None or _which(DRIVERS) is None:
        return "chromium and its driver (apt-get install chromium chromium-driver)"
    return None


def chromium_driver(width: int = 1400, height: int = 1000):
    """A Selenium Chrome driver on the system chromium, headless; the caller quits it."""
    problem = missing()
    if problem:
        raise RuntimeError(f"no headless browser: install {problem}")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    os.environ.setdefault("SE_OFFLINE", "true")  # never let Selenium Manager reach the network
    opts = webdriver.ChromeOptions()
    opts.binary_location = _which(BROWSERS)
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                f"--window-size={width},{height}", "--no-first-run", "--disable-extensions"):  # fmt: skip
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(_which(DRIVERS)), options=opts)


def wait_ready(driver, timeout_s: float = 20.0) -> float:
    """Wait until the page sets body[data-ready]; returns milliseconds from navigation start to then."""
    import time

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        state = driver.execute_script("return document.body && document.body.dataset.ready")
        if state == "1":
            return float(driver.execute_script("return window.__readyAt || performance.now()"))
        if state == "error":
            raise RuntimeError(driver.find_element("id", "fatal").text)
        time.sleep(0.02)
    raise TimeoutError(f"viewer page not ready after {timeout_s:.0f} s")
