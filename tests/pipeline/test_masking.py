"""The URL user-info masking, one pass over the text: the same result as the regular
expressions it replaced (quadratic on long runs of letters), on any text."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from vapipe.pipeline.urls import _userinfos, mask_credentials

# The expressions masking used before (quadratic on long runs of letters; docs/design/masking.md):
# on the texts they handled in time, the one-pass masker must agree with them.
OLD_URL = re.compile(
    r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*:?//)(?P<userinfo>[^\s'\"<>]*)@"
    r"(?=[^\s'\"<>@]*(?:[\s'\"<>]|$))"
)
OLD_CUT = re.compile(
    r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*:?//)[^\s'\"<>/@:]+:(?!\d+(?:[\s'\"<>/?]|$))[^\s'\"<>/@]*"
    r"(?=[\s'\"<>]|$)"
)


def old_mask(text: str) -> str:
    text = OLD_URL.sub(lambda m: f"{m.group('scheme')}***@", text)
    return OLD_CUT.sub(lambda m: f"{m.group('scheme')}***", text)


# Texts made of the characters that matter to URLs, so that URLs (whole, cut, mistyped) turn
# up often.
URLISH = st.text(alphabet="ab1:/@ ?'\"<>.+-%\n", max_size=60)
PIECES = st.lists(
    st.sampled_from(
        ["rtsp://", "http:", "//", "admin", ":", "p@ss", "@", "cam", ":554", "/x", " ", "?",
         "a", "1", "'", "<", "h//", "x:y", "\t"]
    ),
    max_size=14,
).map("".join)  # fmt: skip


@settings(max_examples=3000, deadline=None)
@given(st.one_of(URLISH, PIECES))
def test_masking_is_what_the_expressions_did(text: str) -> None:
    # The expressions masking used before are the reference.
    assert mask_credentials(text) == old_mask(text)


@settings(max_examples=1000, deadline=None)
@given(st.one_of(URLISH, PIECES))
def test_the_userinfos_found_are_the_expressions(text: str) -> None:
    assert _userinfos(text) == [m.group("userinfo") for m in OLD_URL.finditer(text)]


def test_examples() -> None:
    assert mask_credentials("rtsp://admin:p@ss@cam/x") == "rtsp://***@cam/x"
    assert mask_credentials("open http://u:secret") == "open http://***"
    assert mask_credentials("rtsp//a:b@c") == "rtsp//***@c"
    assert mask_credentials("x://h:554 y://h:554?x") == "x://h:554 y://h:554?x"


def test_a_secret_is_masked_percent_encoded_and_decoded() -> None:
    from vapipe.pipeline.urls import register_secret

    register_secret("p@ss/w0rd-mask-test")
    for shown in ("p@ss/w0rd-mask-test", "p%40ss%2Fw0rd-mask-test"):
        assert mask_credentials(f"failed: {shown}!") == "failed: ***!"
    register_secret("q%40ss%2Fw0rd-mask-test")  # given encoded, as in a URL
    assert mask_credentials("q@ss/w0rd-mask-test") == "***"


def test_json_log_lines_are_masked() -> None:
    import json
    import logging

    from vapipe.pipeline.logs import JsonFormatter

    record = logging.LogRecord(
        "x", logging.WARNING, __file__, 1, "open %s failed", ("rtsp://admin:pw9@cam/s",), None
    )
    entry = json.loads(JsonFormatter().format(record))
    assert entry["message"] == "open rtsp://***@cam/s failed"


def test_a_config_registers_each_kind_of_secret_it_holds() -> None:
    # Each value unique to this test: the registry is process-wide.
    from vapipe.pipeline.urls import register_secrets_in

    register_secrets_in({
        "nodes": {
            "cam": {"uri": "rtsp://viewer:cam-pw-81@10.0.0.5/s?token=tok-81&channel=2"},
            "hook": {"url": "https://h.example/x?api_key=key-81&page=3",
                     "headers": {"X-Custom": "hdr-81", "Auth": {"nested": "deep-81"}}},
            "mq": {"password": "mq-pw-81", "passwords": ["not-secret-81"], "user": "user-81"},
            "list": {"Token": ["list-tok-81"]},
        }
    })  # fmt: skip
    for secret in ("cam-pw-81", "viewer:cam-pw-81", "tok-81", "key-81", "hdr-81", "deep-81",
                   "mq-pw-81", "list-tok-81"):  # fmt: skip
        assert mask_credentials(f"<{secret}>") == "<***>", secret
    for plain in ("channel=2", "page=3", "not-secret-81", "user-81", "10.0.0.5"):
        assert mask_credentials(plain) == plain, f"{plain} masked: not a secret"


def test_a_short_password_is_masked_in_a_url_though_not_alone() -> None:
    # Under three characters a registered string would mask ordinary words ("ab" in
    # "table"); in a URL its user-info is masked whatever its length.
    from vapipe.pipeline.urls import register_secret, register_secrets_in

    register_secrets_in({"uri": "rtsp://u:zq@cam-short/s", "password": "zx"})
    register_secret("xy")
    assert mask_credentials("rtsp://u:zq@cam-short/s") == "rtsp://***@cam-short/s"
    assert mask_credentials("zq zx xy") == "zq zx xy"
    register_secret("wq7")
    assert mask_credentials("a wq7 b") == "a *** b"


def test_the_longest_secret_is_masked_first() -> None:
    from vapipe.pipeline.urls import register_secret

    register_secret("long-secret-95")
    register_secret("secret-9")
    assert mask_credentials("x long-secret-95 y secret-9") == "x *** y ***"
