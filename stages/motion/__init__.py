"""The motion gate: detection only on frames where something in the picture moved."""
