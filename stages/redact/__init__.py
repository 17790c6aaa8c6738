"""The ``redact`` node: objects, the boxes found inside them and fixed areas hidden before any
picture leaves the process."""
