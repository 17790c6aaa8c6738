"""Live video in the service's page, in a real headless Chromium (Debian's chromium and
chromium-driver): a tile's Live button plays the stream's fragmented MP4 through Media
Source Extensions, with the token; the pictures move, and the page measures their latency
(now minus the time each frame left its decoder); Stop lets the stream go, and the service
stops encoding it once nobody watches."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.helpers import REPO
from tests.e2e.serve_helpers import serve
from tests.e2e.test_serve_page import browser  # noqa: F401  (the fixture)

webdriver = pytest.importorskip("selenium.webdriver")
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

# The video's current picture drawn on a canvas: its spread of values (a real picture, not
# one flat colour) and a coarse fingerprint (it changes while the video plays).
VIDEO_PICTURE = """
const video = arguments[0];
if (!video.videoWidth) return null;
const canvas = document.createElement("canvas");
canvas.width = 64; canvas.height = 36;
const context = canvas.getContext("2d");
context.drawImage(video, 0, 0, 64, 36);
const data = context.getImageData(0, 0, 64, 36).data;
let sum = 0, squares = 0, count = 0;
for (let i = 0; i < data.length; i += 4) {
  sum += data[i]; squares += data[i] * data[i]; count++;
}
const mean = sum / count;
const print = Array.from(data.slice(0, 400)).join(",");
return {std: Math.sqrt(squares / count - mean * mean), print};
"""


def test_the_live_button_plays_the_annotated_stream_and_measures_its_latency(
    tmp_path: Path,
    browser,  # noqa: F811
) -> None:  # type: ignore[no-untyped-def]
    import os

    env = {**os.environ, "VAPIPE_TOKEN": "live-token-7"}
    config = REPO / "configs" / "file.toml"
    with serve(tmp_path, "cam.loop=true", "cam.realtime=true", config=config, env=env) as served:
        assert served.url is not None
        wait = WebDriverWait(browser, 120, poll_frequency=0.2)
        browser.get(served.url + "/")
        browser.find_element(By.ID, "token-input").send_keys("live-token-7")
        browser.find_element(By.CSS_SELECTOR, "#token-form button").click()
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, '[data-stream="cam"] .live-button'))
        browser.find_element(By.CSS_SELECTOR, '[data-stream="cam"] .live-button').click()
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, '[data-stream="cam"] video'))
        video = browser.find_element(By.CSS_SELECTOR, '[data-stream="cam"] video')
        wait.until(lambda d: int(video.get_attribute("data-frames") or 0) >= 20)
        first = browser.execute_script(VIDEO_PICTURE, video)
        assert first is not None and first["std"] > 10, first
        wait.until(
            lambda d: browser.execute_script(VIDEO_PICTURE, video)["print"] != first["print"]
        )
        latency = float(video.get_attribute("data-latency"))
        # (the page's own measure; its size is the bench's business, its sign is not)
        assert 0 < latency < 30, latency
        shot = tmp_path / "live-page.png"
        browser.save_screenshot(str(shot))
        print(f"screenshot of the page playing: {shot}")
        http = served.client()
        http.headers["Authorization"] = "Bearer live-token-7"
        live = http.get("/api/streams/cam").json()["live"]
        assert live["viewers"] == 1 and live["encoded"] >= 20, live
        browser.find_element(By.CSS_SELECTOR, '[data-stream="cam"] .live-button').click()
        wait.until(lambda d: not d.find_elements(By.CSS_SELECTOR, '[data-stream="cam"] video'))
        wait.until(lambda d: http.get("/api/streams/cam").json()["live"]["viewers"] == 0)
        http.close()
