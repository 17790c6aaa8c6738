"""Every event the tests produce is checked against docs/events.schema.json."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator, FormatChecker

SCHEMA = Path(__file__).resolve().parents[1] / "docs" / "events.schema.json"


@cache
def validator() -> Draft202012Validator:
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema, format_checker=FormatChecker())


def assert_valid_events(events: list[dict[str, Any]]) -> None:
    for event in events:
        errors = sorted(validator().iter_errors(event), key=lambda e: e.path)
        if errors:
            kind = event.get("event")
            detail = [e.message for e in errors][:3]
            raise AssertionError(f"{kind} event breaks docs/events.schema.json: {detail}: {event}")
