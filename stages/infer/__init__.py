"""The infer stage: YOLO heads, class names, and the inference backends."""
