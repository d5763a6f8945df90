"""Headless Chromium (Debian's chromium + chromium-driver, `make chromium`) driven by
Selenium, for the web console's tests: started with the flags this machine's closed
network needs and a fresh profile, and read through small polling helpers (a page's
tables are refreshed by htmx, so a test polls the DOM with a deadline)."""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from selenium import webdriver
from selenium.webdriver.chrome.service import Service

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--hide-scrollbars"]


class Browser:
    def __init__(self, width: int = 1280, height: int = 800) -> None:
        self.profile = tempfile.mkdtemp(prefix="chromium-")
        options = webdriver.ChromeOptions()
        options.binary_location = CHROMIUM
        for flag in [*FLAGS, f"--user-data-dir={self.profile}",
                     f"--window-size={width},{height}"]:
            options.add_argument(flag)
        self.driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
        self.driver.set_page_load_timeout(30)
        self.driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
            "width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})

    def get(self, url: str) -> None:
        self.driver.get(url)

    def js(self, script: str, *args: Any) -> Any:
        return self.driver.execute_script(script, *args)

    def text(self, css: str) -> str | None:
        """The trimmed text of the first element matching `css`, None when none does."""
        return self.js("const e = document.querySelector(arguments[0]);"
                       "return e === null ? null : e.textContent.trim();", css)

    def texts(self, css: str) -> list[str]:
        return self.js("return Array.from(document.querySelectorAll(arguments[0]))"
                       ".map(e => e.textContent.trim());", css)

    def wait(self, what: Callable[[], Any], timeout: float = 20.0, why: str = "") -> Any:
        """Poll `what()` until it is truthy (then return it), failing after `timeout`."""
        deadline = time.monotonic() + timeout
        last: Any = None
        while time.monotonic() < deadline:
            last = what()
            if last:
                return last
            time.sleep(0.1)
        raise AssertionError(f"timed out after {timeout}s waiting for {why or what}: {last!r}")

    def wait_text(self, css: str, expected: str, timeout: float = 20.0) -> None:
        self.wait(lambda: self.text(css) == expected, timeout,
                  f"{css} == {expected!r} (is {self.text(css)!r})")

    def screenshot(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.driver.save_screenshot(str(path))

    def quit(self) -> None:
        try:
            self.driver.quit()
        finally:
            shutil.rmtree(self.profile, ignore_errors=True)
