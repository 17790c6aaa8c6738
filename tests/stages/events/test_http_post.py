"""The webhook's HTTP endpoint on its own: Retry-After in both of its forms, which answers
are final, the request target keeping its query, TLS verified for https."""

from __future__ import annotations

import email.utils
import ssl
import time

import pytest

from vapipe.stages.events.http_post import Answer, Endpoint, retry_after


def test_retry_after_reads_seconds_and_http_dates() -> None:
    assert retry_after("7") == 7.0 and retry_after(" 12 ") == 12.0
    assert retry_after(None) is None and retry_after("") is None
    assert retry_after("soon") is None and retry_after("-3") is None
    later = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 25.0 <= (retry_after(later) or 0.0) <= 30.0, "an HTTP date in 30 s"
    assert retry_after("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0, "a date past is now"


@pytest.mark.parametrize(
    ("status", "ok", "permanent"),
    [(199, False, True), (200, True, False), (204, True, False), (299, True, False),
     (300, False, True), (301, False, True), (404, False, True), (408, False, False),
     (425, False, False), (429, False, False), (499, False, True), (500, False, False),
     (503, False, False)],
)  # fmt: skip
def test_which_answers_are_final(status: int, ok: bool, permanent: bool) -> None:
    answer = Answer(status, None, None)
    assert (answer.ok, answer.permanent) == (ok, permanent)


@pytest.mark.parametrize(
    ("url", "target"),
    [("http://h.example/e", "/e"), ("http://h.example", "/"),
     ("http://h.example/e?key=abc&x=1", "/e?key=abc&x=1"), ("http://h.example?key=k", "/?key=k")],
)  # fmt: skip
def test_the_request_target_keeps_the_path_and_query(url: str, target: str) -> None:
    assert Endpoint(url, {}, 1.0).target == target


def test_https_verifies_the_certificate_and_the_host_name() -> None:
    endpoint = Endpoint("https://h.example:8443/e", {}, 2.0)
    connection = endpoint._connect()  # nothing is sent before the first POST
    context = connection._context  # type: ignore[attr-defined]
    assert endpoint.https and (connection.host, connection.port) == ("h.example", 8443)
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    assert connection.timeout == 2.0 and endpoint.connections == 1
    assert endpoint._connect() is connection and endpoint.connections == 1
    endpoint.close()
    assert not Endpoint("HTTP://h.example/e", {}, 1.0).https
