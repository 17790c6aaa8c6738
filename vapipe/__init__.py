"""vapipe: GStreamer-style video analytics pipelines.

From Python: ``vapipe.Pipeline.from_toml("configs/file.toml").run()`` (docs/python.md).

The code lives in the repository's top-level folders, installed under this name:
``vapipe.pipeline`` (pipeline/: the runtime alone), ``vapipe.stages`` (stages/) and
``vapipe.models`` (models/: the catalogue of models and clips); the application on top sits in
this folder: ``api.py`` (the Python API), ``cli/`` (the commands), ``serve/`` (the service),
``shards/`` (sources over processes or a Ray cluster) and ``quantize/`` (model copies).
"""

from pkgutil import extend_path

# Run from a clone beside a non-editable install, ``import vapipe`` finds this folder first:
# extending the path lets the installed subpackages be found all the same.
__path__ = extend_path(__path__, __name__)

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
__all__ = ["ConfigError", "Event", "Outcome", "Pipeline", "PipelineError", "__version__"]

if TYPE_CHECKING:
    from vapipe.api import Event, Outcome, Pipeline
    from vapipe.pipeline.errors import ConfigError, PipelineError


def __getattr__(name: str) -> Any:
    # Imported when first used: `run-pipeline` starts without the Python API's imports.
    if name in ("Event", "Outcome", "Pipeline"):
        from vapipe import api

        return getattr(api, name)
    if name in ("ConfigError", "PipelineError"):
        from vapipe.pipeline import errors

        return getattr(errors, name)
    raise AttributeError(f"module 'vapipe' has no attribute {name!r}")
