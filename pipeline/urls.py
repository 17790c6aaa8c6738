"""Credentials never leave the process: mask the user-info part of URLs in any text."""

from __future__ import annotations

import re

# scheme://user:password@host... The password may itself hold '@', '/' or '%40', so the
# user-info runs to the last '@' before the host's end (whitespace, quote or end of text).
_URL_WITH_USERINFO = re.compile(
    r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<userinfo>[^\s'\"<>]*)@"
    r"(?=[^\s'\"<>@]*(?:[\s'\"<>]|$))"
)


def mask_credentials(text: str) -> str:
    """``rtsp://admin:p@ss@cam/x`` -> ``rtsp://***@cam/x`` wherever it appears in ``text``."""
    return _URL_WITH_USERINFO.sub(lambda m: f"{m.group('scheme')}***@", text)
