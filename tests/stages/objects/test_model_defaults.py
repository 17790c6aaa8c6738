"""A model's own settings from its manifest entry: an embed node without ``match`` takes its
model's measured one (person-reid 0.89, mobilefacenet 0.68) and says so, a model with none
gets 0.45 with a line asking for one; a classify node without ``threshold`` takes its model's,
else 0.5; ``models info`` shows them."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest

from tests.e2e.helpers import cli
from vapipe.stages.objects import stage as stage_module
from vapipe.stages.objects.classify import ClassifyStage
from vapipe.stages.objects.config import ClassifyConfig, EmbedConfig
from vapipe.stages.objects.embed import DEFAULT_MATCH, EmbedStage


def test_an_embed_node_takes_its_models_measured_match(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO):
        assert EmbedStage("who", EmbedConfig(model="person-reid")).match() == 0.89
        assert EmbedStage("face", EmbedConfig(model="mobilefacenet")).match() == 0.68
    assert "who: match = 0.89, person-reid's own (models/manifest.toml)" in caplog.text
    assert EmbedStage("who", EmbedConfig(model="person-reid", match=0.5)).match() == 0.5
    caplog.clear()
    with caplog.at_level(logging.INFO):
        assert EmbedStage("who", EmbedConfig(model="mine.onnx")).match() == DEFAULT_MATCH == 0.45
    assert "no measured value for mine.onnx: set match for it" in caplog.text


def test_a_classify_node_takes_its_models_threshold(monkeypatch: pytest.MonkeyPatch) -> None:
    assert ClassifyStage("kind", ClassifyConfig(model="mine.onnx")).vote_threshold() == 0.5
    monkeypatch.setattr(stage_module, "model_entry", lambda name: {"threshold": 0.3})
    assert ClassifyStage("kind", ClassifyConfig(model="resnet18")).vote_threshold() == 0.3
    given = ClassifyStage("kind", ClassifyConfig(model="resnet18", threshold=0.7))
    assert given.vote_threshold() == 0.7 and given.memory.rules.threshold == 0.7


def test_models_info_shows_a_models_match(tmp_path: Path) -> None:
    shown = cli("models", "info", "person-reid", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert re.search(r"^match +0\.89 \(an embed node's default: FAR <= 1% measured\)$",
                     shown.stdout, re.MULTILINE), shown.stdout  # fmt: skip
