"""Sinks: annotated video, JSON-lines events; drawing and output paths."""
