"""vapipe: GStreamer-style video analytics pipelines.

The code lives in the repository's top-level folders, installed under this name:
``vapipe.pipeline`` (pipeline/), ``vapipe.stages`` (stages/) and ``vapipe.models`` (models/).
"""

from pkgutil import extend_path

# Run from a clone beside a non-editable install, ``import vapipe`` finds this folder first:
# extending the path lets the installed subpackages be found all the same.
__path__ = extend_path(__path__, __name__)

__version__ = "0.1.0"
