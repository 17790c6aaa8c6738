"""The framework: config, graph, queues, stage lifecycle and runner. Knows nothing about YOLO."""

__version__ = "0.1.0"
