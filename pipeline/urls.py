"""Credentials never leave the process: one masking function for every boundary (log
records, FFmpeg's lines, errors, stats, events, ``repr`` of configs).

Two nets: the user-info of anything shaped like a URL (``scheme://user:pass@host``, also with
the colon of the scheme mistyped away), and every secret the config named (URL passwords,
``password`` keys, ``headers`` values), registered when the config loads, in raw,
percent-decoded and percent-encoded forms, so a message that quotes one in any shape or cut
before its ``@`` still shows ``***``.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable
from typing import Any
from urllib.parse import quote, unquote

# scheme://user:password@host... The password may itself hold '@', '/' or '%40', so the
# user-info runs to the last '@' before the host's end (whitespace, quote or end of text).
_URL_WITH_USERINFO = re.compile(
    r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*:?//)(?P<userinfo>[^\s'\"<>]*)@"
    r"(?=[^\s'\"<>@]*(?:[\s'\"<>]|$))"
)
# scheme://user:pass with no '@' left: a URL cut short (a truncated message). Only a port
# (digits) may follow the colon of a real host.
_CUT_USERINFO = re.compile(
    r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*:?//)[^\s'\"<>/@:]+:(?!\d+(?:[\s'\"<>/?]|$))[^\s'\"<>/@]*"
    r"(?=[\s'\"<>]|$)"
)
_SECRET_KEYS = frozenset({"password", "passwd", "token", "secret", "api_key"})
_MIN_SECRET = 3  # shorter strings would mask ordinary words
_secrets: set[str] = set()
_lock = threading.Lock()


def mask_credentials(text: str) -> str:
    """``rtsp://admin:p@ss@cam/x`` -> ``rtsp://***@cam/x``; registered secrets -> ``***``."""
    text = _URL_WITH_USERINFO.sub(lambda m: f"{m.group('scheme')}***@", text)
    text = _CUT_USERINFO.sub(lambda m: f"{m.group('scheme')}***", text)
    for secret in sorted(_secrets, key=len, reverse=True):
        if secret in text:
            text = text.replace(secret, "***")
    return text


def register_secret(value: str) -> None:
    """Mask ``value`` (and its percent-encoded and -decoded forms) from now on."""
    forms = {value, unquote(value), quote(value, safe=""), quote(unquote(value), safe="")}
    with _lock:
        _secrets.update(form for form in forms if len(form) >= _MIN_SECRET)


def register_secrets_in(value: Any, key: str = "") -> None:
    """Every secret a raw config holds: URL user-info anywhere, values of password-like keys
    and of ``headers`` tables."""
    if isinstance(value, dict):
        for name, item in value.items():
            if name == "headers" and isinstance(item, dict):
                _register_all(v for v in item.values() if isinstance(v, str))
            else:
                register_secrets_in(item, str(name))
    elif isinstance(value, list):
        for item in value:
            register_secrets_in(item, key)
    elif isinstance(value, str):
        if key.lower() in _SECRET_KEYS:
            register_secret(value)
        for match in _URL_WITH_USERINFO.finditer(value):
            userinfo = match.group("userinfo")
            register_secret(userinfo)
            _, _, password = userinfo.partition(":")
            if password:
                register_secret(password)


def _register_all(values: Iterable[str]) -> None:
    for value in values:
        register_secret(value)
