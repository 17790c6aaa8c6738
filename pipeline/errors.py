"""The error hierarchy. Each carries enough context to print one useful line."""

from __future__ import annotations

from pathlib import Path


class PipelineError(Exception):
    """Base of every error this package raises on purpose."""


class ConfigError(PipelineError):
    """Invalid configuration or usage: exit code 2."""

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        line: int | None = None,
        node: str | None = None,
        key: str | None = None,
    ) -> None:
        self.file, self.line, self.node, self.key = file, line, node, key
        self.message = message
        super().__init__(self._render())

    def _render(self) -> str:
        where = ""
        if self.file:
            where = self.file + (f":{self.line}" if self.line else "") + ": "
        subject = ""
        if self.node:
            subject = f"node '{self.node}'"
            if self.key:
                subject += f" key '{self.key}'"
            subject += ": "
        elif self.key:
            subject = f"key '{self.key}': "
        # One line whatever the user typed: a value holding a newline is shown escaped.
        return f"{where}{subject}{self.message}".replace("\r", "\\r").replace("\n", "\\n")


class StageError(PipelineError):
    """A stage failed while running: exit code 1."""

    def __init__(
        self,
        stage: str,
        message: str,
        *,
        source_id: str | None = None,
        seq: int | None = None,
    ) -> None:
        self.stage, self.source_id, self.seq, self.message = stage, source_id, seq, message
        where = f"stage '{stage}'"
        if source_id is not None:
            where += f" (source '{source_id}'"
            where += f", seq {seq})" if seq is not None else ")"
        # One line, as the run's error is printed: an exception's text may hold newlines.
        super().__init__(f"{where}: {message}".replace("\r", "\\r").replace("\n", "\\n"))


def install_hint(extra: str, here: Path | None = None) -> str:
    """How to add an extra to this vapipe, the way it was installed: in the checkout it runs
    from (an editable install), else from the package index."""
    checkout = (here or Path(__file__)).resolve().parents[1]
    if (checkout / "pyproject.toml").is_file() and (checkout / "pipeline").is_dir():
        # As the README installs it: strict editable mode keeps "go to definition" in the
        # checkout, and a plain -e would replace that install with another kind.
        return f"pip install --config-settings editable_mode=strict -e '.[{extra}]' in {checkout}"
    return f"pip install 'vapipe[{extra}]'"


class MissingDependencyError(ConfigError):
    """An optional package is needed: exit 2, as for any setting this install cannot honour;
    the message says what to install, the way vapipe was installed."""

    def __init__(
        self, package: str, purpose: str, extra: str | None = None, *, key: str | None = None
    ) -> None:
        self.package = package
        hint = install_hint(extra) if extra else f"pip install {package}"
        super().__init__(f"{purpose} needs the '{package}' package: {hint}", key=key)
