"""The service's page reads at a glance (issue 52): in a real headless Chromium, at 1400 x 900
the live tiles, the latest events as cards with their pictures and the counts chart are all in
view without scrolling; on a phone (390 x 844) the page is one column, tiles first, nothing
wider than the screen. Both screenshots are written where ``VAPIPE_SCREENSHOTS`` names (the
pictures docs/images/ shows), else into the test's folder."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.e2e.helpers import REPO
from tests.e2e.serve_helpers import serve
from tests.e2e.test_serve_page import PICTURE_STD, browser  # noqa: F401 (the fixture)

webdriver = pytest.importorskip("selenium.webdriver")
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

PLACES = """
const box = (selector) => {
  const r = document.querySelector(selector).getBoundingClientRect();
  return {top: r.top, bottom: r.bottom, left: r.left, right: r.right, width: r.width};
};
return {tile: box("#grid .tile"), card: box("#events li.event"), chart: box("#chart"),
        height: window.innerHeight, width: window.innerWidth,
        scroll: document.documentElement.scrollWidth};
"""


def shots_folder(tmp_path: Path) -> Path:
    folder = Path(os.environ.get("VAPIPE_SCREENSHOTS", tmp_path))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def test_tiles_event_cards_and_the_chart_are_in_view_at_1400_by_900_and_on_a_phone(
    tmp_path: Path,
    browser,  # noqa: F811
) -> None:  # type: ignore[no-untyped-def]
    config = REPO / "configs" / "service.toml"
    browser.set_window_size(1400, 900)
    with serve(tmp_path, config=config) as served:
        assert served.url is not None
        # The placeholder, until the tile's first frame.
        browser.get(served.url + "/")
        wait = WebDriverWait(browser, 180, poll_frequency=0.2)
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#grid .tile"))
        tile = browser.find_element(By.CSS_SELECTOR, "#grid .tile")
        if "live" not in (tile.get_attribute("class") or ""):
            assert tile.find_element(By.CSS_SELECTOR, ".wait").is_displayed()
            assert not tile.find_element(By.TAG_NAME, "img").is_displayed()
        picture = tile.find_element(By.TAG_NAME, "img")
        wait.until(lambda d: d.execute_script(PICTURE_STD, picture) > 10)
        assert not tile.find_element(By.CSS_SELECTOR, ".wait").is_displayed()
        # Events as cards: a picture, what happened (line and direction), to what, when.
        wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#events li.event img")) >= 2)
        crossing = '#events li.event[title*="line cross"]'
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, crossing))
        card = browser.find_element(By.CSS_SELECTOR, crossing)
        what = card.find_element(By.CSS_SELECTOR, ".what").text
        assert what in ("line cross: road · westbound", "line cross: road · eastbound"), what
        assert card.find_element(By.CSS_SELECTOR, ".who").text.split()[0] in ("car", "truck", "bus")
        assert " · cam" in card.find_element(By.CSS_SELECTOR, ".when").text
        assert card.find_elements(By.TAG_NAME, "img")
        assert not browser.find_elements(By.CSS_SELECTOR, "#events .empty")
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#chart circle"))
        wide = browser.execute_script(PLACES)
        folder = shots_folder(tmp_path)
        browser.save_screenshot(str(folder / "page.png"))
        browser.set_window_size(390, 844)
        wait.until(lambda d: d.execute_script("return window.innerWidth") <= 390)
        narrow = browser.execute_script(PLACES)
        browser.save_screenshot(str(folder / "page-phone.png"))
    for part in ("tile", "card", "chart"):
        assert wide[part]["top"] >= 0 and wide[part]["bottom"] <= wide["height"], (part, wide)
    assert wide["scroll"] <= wide["width"]
    assert narrow["scroll"] <= narrow["width"], narrow  # nothing wider than a phone
    assert narrow["tile"]["bottom"] <= narrow["card"]["top"], narrow  # tiles first
    assert narrow["tile"]["width"] >= 300
    for name in ("page.png", "page-phone.png"):
        assert (folder / name).stat().st_size > 20_000
