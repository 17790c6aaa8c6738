"""The service's page with a classifier on the cars: the events list says each car's label,
and the history filters by it, in a real headless Chromium."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.e2e.helpers import REPO
from tests.e2e.serve_helpers import serve
from tests.e2e.test_serve_page import browser  # noqa: F401 (the fixture)
from tests.object_models import LABELS, brightness_classifier

webdriver = pytest.importorskip("selenium.webdriver")
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402


def test_the_history_shows_and_filters_the_classifier_s_labels(
    tmp_path: Path,
    browser,  # noqa: F811
) -> None:  # type: ignore[no-untyped-def]
    model = brightness_classifier(tmp_path / "brightness.onnx")
    text = (REPO / "configs" / "service.toml").read_text(encoding="utf-8")
    assert "track ! analytics" in text, "configs/service.toml's links changed: update this test"
    text = text.replace("track ! analytics", "track ! kind ! analytics")
    text += f'\n[nodes.kind]\ntype = "classify"\nmodel = "{model}"\n'
    config = tmp_path / "service.toml"
    config.write_text(text, encoding="utf-8")
    overrides = ("cam.loop=false", "cam.realtime=false")
    with serve(tmp_path, *overrides, config=config) as served, served.client() as client:
        assert served.url is not None
        deadline = time.monotonic() + 180
        while client.get("/api/streams").json()[0]["state"] != "down":
            assert time.monotonic() < deadline, "the clip did not end"
            time.sleep(0.2)

        def crossings(label: str) -> list[dict]:  # type: ignore[type-arg]
            page = client.get("/api/events/history", params={
                "attribute": label, "type": "line_cross", "limit": 1000})  # fmt: skip
            return page.json()["events"]

        wait = WebDriverWait(browser, 120, poll_frequency=0.2)
        wait.until(lambda d: any(crossings(label) for label in LABELS))
        browser.get(served.url + "/")
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#history li.event"))
        # A card's second line: what the event was about, and what the classifier said.
        listed = [e.text for e in browser.find_elements(By.CSS_SELECTOR, "#history li.event .who")]
        assert any(text.endswith(f"· {label}") for text in listed for label in LABELS), listed[:5]
        form = browser.find_element(By.ID, "history-filters")
        form.find_element(By.CSS_SELECTOR, 'select[name="type"]').send_keys("line_cross")
        field = form.find_element(By.NAME, "attribute")
        for label in LABELS:
            field.clear()
            field.send_keys(label)
            browser.execute_script("arguments[0].dispatchEvent(new Event('change'))", field)

            def filtered(driver, label=label):  # type: ignore[no-untyped-def]
                items = driver.find_elements(By.CSS_SELECTOR, "#history li.event .who")
                expected = min(len(crossings(label)), 60)
                return len(items) == expected and all(i.text.endswith(f"· {label}") for i in items)

            wait.until(filtered)
