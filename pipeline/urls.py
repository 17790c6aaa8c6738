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
from urllib.parse import parse_qsl, quote, unquote, urlsplit

# A URL's user-info is found token by token (a token ends at whitespace, a quote or <>), in
# one pass over the text: a regular expression that tried a scheme at every letter was
# quadratic (27 s for a 20,000-character source id). Within a token:
# - scheme://user:password@host: the user-info runs from the first '//' that follows a
#   scheme to the token's last '@' (a password may itself hold '@', '/' or '%40');
# - scheme://user:pass with no '@' and no '/' after it: a URL cut short (a truncated message),
#   unless what follows the colon is a port (digits, then the token's end or '?').
# The colon of the scheme may have been mistyped away (``rtsp//``).
_TOKEN = re.compile(r"[^\s'\"<>]+")
_SCHEME_CHARS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+.-"
_LETTER = re.compile("[A-Za-z]")
_PORT = re.compile(r"\d+(?:\?|$)")


def _scheme_before(token: str, slashes: int) -> bool:
    """Whether a scheme (a letter, then letters, digits, '+', '.' or '-', then an optional
    ':') ends right before ``token[slashes]``. The look back stops at the first character no
    scheme holds, so it never passes the '/' of an earlier '//': the looks over one token are
    linear."""
    end = slashes - 1 if slashes and token[slashes - 1] == ":" else slashes
    start = end
    while start > 0 and token[start - 1] in _SCHEME_CHARS:
        start -= 1
    return _LETTER.search(token, start, end) is not None


def _split_token(token: str) -> tuple[str, str | None, str]:
    """(before, user-info or None, after) of a whole URL: ``before + user-info + after``."""
    last_at = token.rfind("@")
    slashes = token.find("//")
    while slashes != -1 and slashes + 2 <= last_at:
        if _scheme_before(token, slashes):
            return token[: slashes + 2], token[slashes + 2 : last_at], token[last_at:]
        slashes = token.find("//", slashes + 2)
    return token, None, ""


def _mask_cut(text: str) -> str:
    """``scheme://user:pass`` at the end of ``text`` (which holds a '//') masked. Only the
    last '//' can have no '/' after it."""
    slashes = text.rfind("//")
    rest = text[slashes + 2 :]
    user, colon, password = rest.partition(":")
    if not user or not colon or "/" in rest or "@" in rest or _PORT.match(password):
        return text
    return text[: slashes + 2] + "***" if _scheme_before(text, slashes) else text


def _masked_token(match: re.Match[str]) -> str:
    token = match.group()
    if "//" not in token:
        return token
    before, userinfo, after = _split_token(token)
    if userinfo is None:
        return _mask_cut(before)
    return f"{before}***{after}" if "//" not in after else _mask_cut(f"{before}***{after}")


def _userinfos(text: str) -> list[str]:
    """The user-info of every ``scheme://user-info@host`` in ``text``."""
    found = []
    for match in _TOKEN.finditer(text):
        _, userinfo, _ = _split_token(match.group())
        if userinfo is not None:
            found.append(userinfo)
    return found


_SECRET_KEYS = frozenset({"password", "passwd", "token", "secret", "api_key"})
_SECRET_PARAM = re.compile(
    r"token|key|secret|passw|pwd|signature|^sig$|auth|credential|session", re.IGNORECASE
)
_MIN_SECRET = 3  # shorter strings would mask ordinary words
_secrets: set[str] = set()
_lock = threading.Lock()


def mask_credentials(text: str) -> str:
    """``rtsp://admin:p@ss@cam/x`` -> ``rtsp://***@cam/x``; registered secrets -> ``***``."""
    if "//" in text:
        text = _TOKEN.sub(_masked_token, text)
    return _mask_each(text, _secrets)


def _mask_each(text: str, secrets: Iterable[str]) -> str:
    """Each of ``secrets`` in ``text`` -> ``***``, the longest first (a secret holding a
    shorter one is masked whole)."""
    for secret in sorted(secrets, key=len, reverse=True):
        if secret in text:
            text = text.replace(secret, "***")
    return text


def register_secret(value: str) -> None:
    """Mask ``value`` (and its percent-encoded and -decoded forms) from now on."""
    _register_all([value])


def _forms(value: str) -> set[str]:
    forms = {value, unquote(value), quote(value, safe=""), quote(unquote(value), safe="")}
    return {form for form in forms if len(form) >= _MIN_SECRET}


def register_secrets_in(value: Any) -> None:
    """Mask every secret ``value`` (a raw config, a request body) holds from now on."""
    _register_all(secrets_in(value))


def secrets_in(value: Any, key: str = "", secret: bool = False) -> set[str]:
    """Every secret a raw config holds: URL user-info anywhere, secret-looking query values
    of URLs (``?token=...``), and everything under a password-like key or ``headers``,
    whatever its shape (a table where a string belongs is still a secret)."""
    found: set[str] = set()
    secret = secret or key.lower() in _SECRET_KEYS or key == "headers"
    if isinstance(value, dict):
        for name, item in value.items():
            found |= secrets_in(item, str(name), secret)
    elif isinstance(value, list):
        for item in value:
            found |= secrets_in(item, key, secret)
    elif isinstance(value, str):
        if secret:
            found.add(value)
        if "//" in value:
            for userinfo in _userinfos(value):
                found.add(userinfo)
                _, _, password = userinfo.partition(":")
                if password:
                    found.add(password)
        if "?" in value:
            found.update(_secret_query_values(value))
    return found


def mask_also(text: str, secrets: Iterable[str]) -> str:
    """``mask_credentials``, and ``secrets`` masked too without registering them (those of a
    request that was refused: the process keeps no memory of them)."""
    return _mask_each(mask_credentials(text), {f for s in secrets for f in _forms(s)})


def _secret_query_values(text: str) -> list[str]:
    """Values of query parameters whose names say they are secrets, in URLs in ``text``."""
    found = []
    for match in _TOKEN.finditer(text):
        query = match.group().partition("?")[2].partition("#")[0]
        for name, value in parse_qsl(query, keep_blank_values=False):
            if _SECRET_PARAM.search(name):
                found.append(value)
    return found


def _register_all(values: Iterable[str]) -> None:
    forms = {form for value in values for form in _forms(value)}
    with _lock:
        _secrets.update(forms)


def shown_url(url: str, with_path: bool = False) -> str:
    """``url`` as logs and stats show it: credentials masked and, unless ``with_path``, only
    its scheme, host and port (``https://hooks.example.com/***``): many services put the
    secret of a webhook in its path."""
    masked = mask_credentials(url)
    if with_path:
        return masked
    parts = urlsplit(masked)
    hidden = parts.path.strip("/") or parts.query or parts.fragment
    return f"{parts.scheme}://{parts.netloc}" + ("/***" if hidden else "")


def hidden_parts(url: str) -> tuple[str, ...]:
    """What ``shown_url`` leaves out of ``url`` (its path and query), for ``mask_also`` on a
    message that may quote the whole URL."""
    parts = urlsplit(url)
    return tuple(part for part in (parts.path.strip("/"), parts.query, parts.fragment) if part)
