"""pipeline/urls.py example by example: each rule of the URL net and of the registered secrets,
at its edges (test_masking.py checks the same against the old expressions on generated text)."""

from __future__ import annotations

import pytest

from vapipe.pipeline.urls import (
    mask_also,
    mask_credentials,
    register_secret,
    register_secrets_in,
    secrets_in,
)


@pytest.mark.parametrize(
    ("text", "masked"),
    [
        ("rtsp://admin:pw@cam/x", "rtsp://***@cam/x"),
        ("rtsp://admin:p@ss@cam/x", "rtsp://***@cam/x"),  # to the token's last '@'
        ("rtsp//admin:pw@cam/x", "rtsp//***@cam/x"),  # the scheme's colon mistyped away
        ("svn+ssh.v-2://u:p@host", "svn+ssh.v-2://***@host"),
        ("open 'rtsp://a:b@h/x' failed", "open 'rtsp://***@h/x' failed"),
        ("<rtsp://a:b@h>", "<rtsp://***@h>"),
        ("rtsp://a:b@h1 and http://c:d@h2", "rtsp://***@h1 and http://***@h2"),
        ("http://proxy/x?to=rtsp://a:b@cam", "http://***@cam"),  # the last '@' ends it
        ("//user:pw@host", "//user:pw@host"),  # no scheme: not a URL
        ("1://user:pw@host", "1://user:pw@host"),  # a scheme starts with a letter
        ("path/to//user:pw@host", "path/to//***@host"),  # "to//": a mistyped scheme, masked
        ("x/rtsp://u:p@h", "x/rtsp://***@h"),
        ("no url here", "no url here"),
        # cut short before the '@' (a truncated message)
        ("failed: rtsp://admin:secr", "failed: rtsp://***"),
        ("failed: rtsp//admin:secr", "failed: rtsp//***"),
        ("rtsp://cam:554", "rtsp://cam:554"),  # a port, not a password
        ("rtsp://cam:554?tcp", "rtsp://cam:554?tcp"),
        ("rtsp://cam:554x", "rtsp://***"),  # not only digits: a password
        ("rtsp://cam:pw/stream", "rtsp://cam:pw/stream"),  # a path: host and port
        ("rtsp://:pw", "rtsp://:pw"),  # no user
        ("rtsp://user", "rtsp://user"),  # no colon
        ("//u:pw", "//u:pw"),
        ("a/b//u:pw", "a/b//***"),
        ("a/2//u:pw", "a/2//u:pw"),  # no letter before the "//": no scheme
        ("rtsp://u:p@h//v:w", "rtsp://***@h//***"),  # "h//v:w" looks cut short: masked too
        ("rtsp://u:p@h//v", "rtsp://***@h//v"),
        ("rtsp://u:p@h/x rtsp://v:w", "rtsp://***@h/x rtsp://***"),
        # the scheme's edges: first in the text, one letter; letters only at its end
        ("x://u:p@h", "x://***@h"),
        ("9999rtsp://u:p@h", "9999rtsp://***@h"),
        ("1//a://u:p@h", "1//a://***@h"),  # the first '//' has no scheme, the next one has
        ("rtsp://@h", "rtsp://***@h"),  # empty user-info: nothing to show either way
        ("abcd@x://u:pw", "abcd@x://***"),  # the '@' before the '//': cut short, masked so
        ("rtsp://a/b:c", "rtsp://a/b:c"),  # a '/' before the colon: a path
        ("x://:pw", "x://:pw"),  # no user
    ],
)
def test_the_user_info_of_a_url_is_masked(text: str, masked: str) -> None:
    assert mask_credentials(text) == masked


def test_a_registered_secret_is_masked_in_each_form() -> None:
    register_secret("s3cr/t!urls")
    for form in ("s3cr/t!urls", "s3cr%2Ft%21urls"):
        assert mask_credentials(f"it was {form}.") == "it was ***."
    register_secret("p%40ss-urls")  # given encoded: its decoded form too
    assert mask_credentials("p@ss-urls p%40ss-urls") == "*** ***"


def test_a_secret_of_three_characters_is_masked_and_of_two_is_not() -> None:
    register_secret("q7z")
    register_secret("k9")
    assert mask_credentials("q7z k9") == "*** k9"


def test_a_secret_holding_a_shorter_one_is_masked_whole() -> None:
    register_secret("wxy")
    register_secret("vwxyzurls")
    assert mask_credentials("[vwxyzurls] [wxy]") == "[***] [***]"


@pytest.mark.parametrize(
    ("config", "found"),
    [
        ({"password": "pw1"}, {"pw1"}),
        ({"PassWord": "pw2"}, {"pw2"}),
        ({"passwd": "pw3", "token": "t0k", "secret": "s3c", "api_key": "k3y"},
         {"pw3", "t0k", "s3c", "k3y"}),
        ({"headers": {"Authorization": "Bearer abc"}}, {"Bearer abc"}),
        ({"password": ["a1", "b2"]}, {"a1", "b2"}),  # whatever its shape
        ({"token": {"inner": "val"}}, {"val"}),
        ({"mqtt": [{"password": "deep"}]}, {"deep"}),
        ({"name": "plain", "count": 3}, set()),
        ({"uri": "rtsp://u:pw@h/s"}, {"u:pw", "pw"}),
        ({"uri": "rtsp://onlyuser@h/s"}, {"onlyuser"}),
        ({"uri": "rtsps://u:pw@h/s"}, {"u:pw", "pw"}),
        ({"uri": "x://u:pw@h/s"}, {"u:pw", "pw"}),
        ({"url": "http://h/x?token=abc&name=bob&sig=zz&signature=q&sign=no#token=frag"},
         {"abc", "zz", "q"}),
        ({"url": "http://h/x?api_key=&session_id=s1"}, {"s1"}),  # blank values are nothing
        ({"note": "what? nothing"}, set()),
    ],
)  # fmt: skip
def test_secrets_in_a_config(config: dict, found: set[str]) -> None:
    assert secrets_in(config) == found


def test_a_registered_config_s_secrets_are_masked_from_then_on() -> None:
    assert mask_credentials("key kk-urls-1") == "key kk-urls-1"
    register_secrets_in({"webhook": {"headers": {"X-Key": "kk-urls-1"}}})
    assert mask_credentials("key kk-urls-1") == "key ***"


def test_secrets_masked_also_are_not_kept() -> None:
    assert (
        mask_also("refused zz-urls-9 (rtsp://a:b@h)", ["zz-urls-9"]) == "refused *** (rtsp://***@h)"
    )
    assert mask_also("encoded zz%2Furls", ["zz/urls"]) == "encoded ***"
    assert mask_credentials("refused zz-urls-9") == "refused zz-urls-9"
