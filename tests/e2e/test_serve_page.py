"""The service's page in a real headless Chromium (Debian's chromium and chromium-driver,
driven by selenium): live previews, adding a stream through the form, drawing a line on a
stream and saving it, which then counts crossings."""

from __future__ import annotations

import itertools
import shutil
from pathlib import Path

import pytest

from tests.conftest import asset
from tests.e2e.helpers import REPO, make_clip
from tests.e2e.serve_helpers import Events, serve

webdriver = pytest.importorskip("selenium.webdriver")
from selenium.webdriver.common.action_chains import ActionChains  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")

# A tile's picture is real when it decoded and is not one flat colour.
PICTURE_STD = """
const img = arguments[0];
if (!img.complete || !img.naturalWidth) return -1;
const canvas = document.createElement("canvas");
canvas.width = img.naturalWidth; canvas.height = img.naturalHeight;
const context = canvas.getContext("2d");
context.drawImage(img, 0, 0);
const data = context.getImageData(0, 0, canvas.width, canvas.height).data;
let sum = 0, squares = 0, count = 0;
for (let i = 0; i < data.length; i += 4 * 97) {
  sum += data[i]; squares += data[i] * data[i]; count++;
}
const mean = sum / count;
return Math.sqrt(squares / count - mean * mean);
"""


@pytest.fixture
def browser(tmp_path: Path):  # type: ignore[no-untyped-def]
    if CHROMIUM is None or DRIVER is None:
        pytest.fail(
            "the page test needs Debian's chromium and chromium-driver (.ci/run installs them)"
        )
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--window-size=1400,1000",
        f"--user-data-dir={tmp_path / 'chromium'}",
    ):
        options.add_argument(argument)  # fmt: skip
    driver = webdriver.Chrome(service=Service(DRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def test_the_page_shows_streams_adds_one_and_draws_a_line_that_counts(
    tmp_path: Path, browser
) -> None:  # type: ignore[no-untyped-def]
    traffic = asset("media", "traffic.mp4")
    config = REPO / "configs" / "analytics.toml"
    overrides = ("cam.loop=true", "video.path=out/{source_id}.mp4",
                 "events.path=out/{source_id}.jsonl")  # fmt: skip
    with serve(tmp_path, *overrides, config=config) as served:
        assert served.url is not None
        wait = WebDriverWait(browser, 120, poll_frequency=0.2)
        browser.get(served.url + "/")

        def picture(stream: str):  # type: ignore[no-untyped-def]
            return browser.find_element(By.CSS_SELECTOR, f'[data-stream="{stream}"] img')

        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, '[data-stream="cam"] img'))
        wait.until(lambda d: d.execute_script(PICTURE_STD, picture("cam")) > 10)

        form = browser.find_element(By.ID, "add")
        form.find_element(By.NAME, "id").send_keys("b")
        form.find_element(By.NAME, "uri").send_keys(str(traffic))
        form.find_element(By.NAME, "options").send_keys('{"loop": true}')
        form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, '[data-stream="b"] img'))
        wait.until(lambda d: d.execute_script(PICTURE_STD, picture("b")) > 10)

        events = Events(served, "?type=line_cross&source=b")
        picture("b").click()
        editor = browser.find_element(By.ID, "editor-picture")
        wait.until(lambda d: d.execute_script("return arguments[0].naturalWidth", editor) > 0)
        height = editor.size["height"]
        # A vertical line through the middle of the road, where the cars cross.
        for offset in (-0.45 * height, 0.45 * height):
            ActionChains(browser).move_to_element_with_offset(
                editor, 0, int(offset)
            ).click().perform()
        name = browser.find_element(By.ID, "shape-name")
        name.clear()
        name.send_keys("painted")
        browser.find_element(By.ID, "save-line").click()
        wait.until(lambda d: "saved line 'painted'" in d.find_element(By.ID, "editor-error").text)
        events.wait(lambda items: any(i.get("line") == "painted" for i in items), 180,
                    "a crossing of the line drawn on the page")  # fmt: skip
        events.close()
        shot = tmp_path / "serve-page.png"
        browser.save_screenshot(str(shot))
        print(f"screenshot of the page: {shot}")
        assert shot.stat().st_size > 10_000


REQUESTS = "return performance.getEntriesByType('resource').map((e) => e.name)"


def test_the_page_asks_for_the_token_once_says_when_it_is_wrong_and_waits(
    tmp_path: Path, browser
) -> None:  # type: ignore[no-untyped-def]
    import os
    import time

    env = {**os.environ, "VAPIPE_TOKEN": "right-token-42"}
    with serve(tmp_path, "cam.loop=true", env=env) as served:
        assert served.url is not None
        wait = WebDriverWait(browser, 120, poll_frequency=0.2)
        browser.get(served.url + "/")
        message = browser.find_element(By.ID, "token-message")
        wait.until(lambda d: message.text == "This service needs its token.")
        # Locked: nothing more is asked of the service while the form waits (no prompt per
        # request, no retry loop: 142 prompts in 8 s before). A request sent with the one
        # that locked the page may still finish after the form shows (its timing entry comes
        # at its end), so what is checked is that no API address is asked twice.
        time.sleep(2)  # a window to see no request in; the page polls every 0.5-1 s
        api = [url for url in browser.execute_script(REQUESTS) if "/api/" in url]
        assert api and len(api) == len(set(api)), api
        field = browser.find_element(By.ID, "token-input")
        field.send_keys("wrong-token")
        browser.find_element(By.CSS_SELECTOR, "#token-form button").click()
        wait.until(lambda d: message.text == "Wrong token: enter the service's token.")
        assert browser.find_element(By.ID, "token-form").is_displayed()
        field.clear()
        field.send_keys("right-token-42")
        browser.find_element(By.CSS_SELECTOR, "#token-form button").click()
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, '[data-stream="cam"] img'))
        assert not browser.find_element(By.ID, "token-form").is_displayed()
        # Nothing the page loads answered 401 needlessly (the icon is not asked for).
        assert not [url for url in browser.execute_script(REQUESTS) if "favicon" in url]


def test_the_page_shows_past_events_plays_a_clip_charts_counts_and_keeps_them_after_a_restart(
    tmp_path: Path, browser
) -> None:  # type: ignore[no-untyped-def]
    import json
    import os
    import time

    config = REPO / "configs" / "service.toml"
    overrides = ("cam.loop=false", "cam.realtime=false")  # the clip once, at full speed
    env = {**os.environ, "VAPIPE_TOKEN": "pictures-42"}
    with serve(tmp_path, *overrides, config=config, env=env, token="pictures-42") as served:
        assert served.url is not None
        with served.client() as client:
            deadline = time.monotonic() + 180
            while time.monotonic() < deadline:
                stream = client.get("/api/streams").json()[0]
                if stream["state"] == "down":  # the file has ended: every event is kept
                    break
                time.sleep(0.2)
            # removed, its last clip is finished (a file that ended keeps its outputs open
            # until then, as a camera that comes back would go on)
            assert client.delete("/api/streams/cam").status_code == 200
            # the history commits a moment after the events sink wrote: it catches up with it
            written = tmp_path / "out" / "cam.jsonl"
            deadline = time.monotonic() + 60
            while True:
                lines = [json.loads(x) for x in written.read_text(encoding="utf-8").splitlines()]
                sunk = [e for e in reversed(lines) if e["event"] != "frame"]
                page = client.get("/api/events/history", params={"limit": 1000})
                kept = page.json()["events"]
                if [e.get("id") for e in kept] == [e.get("id") for e in sunk]:
                    break
                assert time.monotonic() < deadline, (len(kept), len(sunk))
                time.sleep(0.2)
            crossings = [e for e in kept if e["event"] == "line_cross"]
            assert len(crossings) >= 20
            counts = client.get("/api/counts", params={
                "line": "road", "bucket": "5m", "since": time.time() - 86400}).json()  # fmt: skip
        wait = WebDriverWait(browser, 120, poll_frequency=0.2)
        browser.get(served.url + "/")
        field = browser.find_element(By.ID, "token-input")
        wait.until(lambda d: field.is_displayed())
        field.send_keys("pictures-42")
        browser.find_element(By.CSS_SELECTOR, "#token-form button").click()
        # the events panel: the last 60, each with its picture loaded through the cookie
        shown = kept[:60]
        wait.until(
            lambda d: len(d.find_elements(By.CSS_SELECTOR, "#history li.event")) == len(shown)
        )
        pictures = browser.find_elements(By.CSS_SELECTOR, "#history li.event img")
        assert len(pictures) == len([e for e in shown if "snapshot" in e]) > 10
        wait.until(lambda d: all(d.execute_script(
            "return arguments[0].complete && arguments[0].naturalWidth", img) >= 160
            for img in pictures))  # fmt: skip
        # the chart: one point per bucket and direction
        wait.until(lambda d: "crossings" in d.find_element(By.ID, "chart-note").text)
        directions = {d for b in counts["buckets"] for d in b["counts"]}
        for direction in directions:
            points = browser.find_elements(
                By.CSS_SELECTOR, f'#chart circle[data-direction="{direction}"]'
            )
            assert len(points) == len(counts["buckets"]), direction
        assert sum(b["total"] for b in counts["buckets"]) == len(crossings)
        # a click shows the snapshot and plays the clip from the event's moment
        newest = crossings[0]
        browser.find_element(By.CSS_SELECTOR, f'#history li[data-id="{newest["id"]}"]').click()
        video = browser.find_element(By.ID, "event-clip")
        playing = "return arguments[0].readyState >= 2 ? arguments[0].currentTime : -1"
        wait.until(lambda d: d.execute_script(playing, video) >= 0)
        started = browser.execute_script(playing, video)
        wait.until(lambda d: d.execute_script(playing, video) > started + 0.3)
        snapshot = browser.find_element(By.ID, "event-snapshot")
        wait.until(lambda d: d.execute_script("return arguments[0].naturalWidth", snapshot) > 0)
        shot = tmp_path / "serve-history-page.png"
        browser.save_screenshot(str(shot))
        print(f"screenshot of the page with its history: {shot}")
        assert shot.stat().st_size > 10_000
    # a restart finds every event it kept, and their pictures
    restarted = serve(tmp_path, *overrides, config=config, env=env, token="pictures-42")
    with restarted as served, served.client() as client:
        again = client.get("/api/events/history", params={"limit": 1000}).json()["events"]

        def whole(events: list[dict]) -> set[str]:  # type: ignore[type-arg]
            return {json.dumps(e, sort_keys=True) for e in events}

        assert whole(kept) <= whole(again)
        one = client.get(f"/api/events/{newest['id']}").json()
        assert one["snapshot"] == newest["snapshot"]
        clip = client.get(one["urls"]["clip"], headers={"Range": "bytes=0-99"})
        assert clip.status_code == 206 and len(clip.content) == 100


# Each tile's box, and whether any of its texts is cut (wider than the box that shows it).
TILE_LAYOUT = """
return [...document.querySelectorAll("#grid .tile")].map((tile) => {
  const box = tile.getBoundingClientRect();
  const cut = [...tile.querySelectorAll(".info > *")].some(
    (item) => item.scrollWidth > item.clientWidth + 1 ||
              item.getBoundingClientRect().right > box.right + 1);
  return {id: tile.dataset.stream, left: box.left, top: box.top, right: box.right,
          bottom: box.bottom, width: box.width, cut: cut};
});
"""


@pytest.mark.parametrize("window", [(1400, 1000), (500, 1000)])
def test_sixteen_streams_get_tiles_that_keep_their_width_pictures_and_text(
    tmp_path: Path, browser, window: tuple[int, int]
) -> None:  # type: ignore[no-untyped-def]
    """A doorway-per-tile wall: 16 streams at once, on a wide window (columns) and a narrow
    one (one column); every tile at least 260 px wide, none over another, every picture
    drawn and no text cut."""
    clip = make_clip(tmp_path / "small.mp4", frames=50, width=320, height=180, rate=10)
    config = tmp_path / "wall.toml"
    config.write_text(
        'links = ["cam ! events"]\n'
        f'[nodes.cam]\ntype = "source"\nuri = "{clip}"\nloop = true\nrealtime = true\n'
        '[nodes.events]\ntype = "events"\npath = "out/{source_id}.jsonl"\n'
        "empty_frames = false\n"
    )
    browser.set_window_size(*window)
    with serve(tmp_path, config=config) as served, served.client() as http:
        for index in range(1, 16):
            added = http.post("/api/streams", json={"id": f"door-{index:02d}", "uri": str(clip),
                                                     "options": {"loop": True}})  # fmt: skip
            assert added.status_code == 201, added.text
        assert served.url is not None
        browser.get(served.url + "/")
        wait = WebDriverWait(browser, 120, poll_frequency=0.2)
        wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#grid .tile img")) == 16)
        for picture in browser.find_elements(By.CSS_SELECTOR, "#grid .tile img"):
            wait.until(lambda d, picture=picture: d.execute_script(PICTURE_STD, picture) > 10)
        tiles = browser.execute_script(TILE_LAYOUT)
        shot = tmp_path / f"wall-{window[0]}.png"
        browser.save_screenshot(str(shot))
        print(f"screenshot of 16 tiles: {shot}")
    assert sorted(t["id"] for t in tiles) == ["cam"] + [f"door-{i:02d}" for i in range(1, 16)]
    assert all(t["width"] >= 260 for t in tiles), [round(t["width"]) for t in tiles]
    assert not [t["id"] for t in tiles if t["cut"]]
    for a, b in itertools.combinations(tiles, 2):
        apart = (a["right"] <= b["left"] or b["right"] <= a["left"]
                 or a["bottom"] <= b["top"] or b["bottom"] <= a["top"])  # fmt: skip
        assert apart, (a, b)
    columns = len({round(t["left"]) for t in tiles})
    assert columns == (1 if window[0] < 900 else 3), columns
