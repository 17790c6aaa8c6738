"""The framework: config, graph, queues, stage lifecycle and runner. Knows nothing about YOLO."""
