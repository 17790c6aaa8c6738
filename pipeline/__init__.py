"""The graph runtime: config, validation and ``--set``, the graph, queues, the stage contract
and lifecycle, the runner, outcomes and errors, what a run reads and writes, metrics, signals,
logging and asset resolution. It knows nothing about YOLO.

Its rooms (subpackages) build on it: ``serve`` (the service), ``shards`` (process and cluster
shards) and ``cli`` (the commands). Dependencies point one way, ``cli`` -> ``serve`` ->
``shards`` -> the runtime, and ``vapipe.stages`` import only the runtime: the runtime's own
modules never import a room (tests/test_import_direction.py).
"""
