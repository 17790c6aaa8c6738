"""No request can wedge the service: an input that never opens (a FIFO nobody writes) holds
up neither the other streams' adds and removes nor the stop, in one process and in shards."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import httpx
import pytest

from tests.conftest import asset
from tests.e2e.helpers import wait_for
from tests.e2e.serve_helpers import per_source_outputs, serve


@pytest.mark.parametrize("shards", [1, 2])
def test_a_fifo_nobody_writes_holds_up_no_other_request(tmp_path: Path, shards: int) -> None:
    people = asset("media", "people.mp4")
    os.mkfifo(tmp_path / "cam.fifo")
    os.mkfifo(tmp_path / "never.fifo")
    overrides = (*per_source_outputs(), f"pipeline.shards={shards}")
    with serve(tmp_path, *overrides) as served, served.client() as http:
        wait_for(lambda: http.get("/readyz").status_code == 200, 180, "the service ready")
        added = http.post("/api/streams", json={"id": "b", "uri": str(people)})
        assert added.status_code == 201, added.text

        answers: list[httpx.Response | Exception] = []
        stuck = {"id": "fifo", "uri": "cam.fifo", "options": {"open_timeout_s": 600}}

        def post_stuck() -> None:
            try:
                answers.append(http.post("/api/streams", json=stuck))
            except Exception as exc:  # seen by the waits below, not lost with the thread
                answers.append(exc)

        post = threading.Thread(target=post_stuck)
        post.start()

        def id_held() -> bool:  # the first POST is inside its open
            # A body refused by its keys (422) unless the id is taken (409, checked first):
            # it is never held itself, so it cannot race the FIFO's POST for the id.
            probe = {"id": "fifo", "uri": "x.mp4", "options": {"fps": "bad"}}
            again = http.post("/api/streams", json=probe)
            assert again.status_code in (409, 422), again.text
            assert not answers, [getattr(a, "text", a) for a in answers]
            return again.status_code == 409

        wait_for(id_held, 120, "the FIFO's stream id held while it opens")
        assert http.delete("/api/streams/fifo").status_code == 409  # not there yet
        removed = http.delete("/api/streams/b")
        assert removed.status_code == 200, removed.text
        other = http.post("/api/streams", json={"id": "c", "uri": str(people)})
        assert other.status_code == 201, other.text
        assert post.is_alive() and not answers, "the FIFO's POST answered before a writer came"

        # A writer that closes at once: the open ends, with nothing to read in it.
        os.close(os.open(tmp_path / "cam.fifo", os.O_WRONLY))
        post.join(120)
        assert answers and isinstance(answers[0], httpx.Response), answers
        assert answers[0].status_code == 422, answers[0].text
        assert "cam.fifo" in answers[0].json()["error"]

        # One that never gets a writer is given up at its open_timeout_s, and named.
        never = {"id": "never", "uri": "never.fifo", "options": {"open_timeout_s": 0.5}}
        refused = http.post("/api/streams", json=never)
        assert refused.status_code == 422, refused.text
        assert refused.json()["error"].endswith(
            "cannot open never.fifo: no answer within 0.5 s (open_timeout_s)"
        ), refused.text
        assert {s["id"] for s in http.get("/api/streams").json()} == {"cam", "c"}
        # The abandoned open still sits in the kernel: the stop does not wait for it.
        assert served.stop() == 130
