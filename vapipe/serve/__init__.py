"""The service (``run-pipeline serve``): a graph that runs until stopped while streams are
added and removed over HTTP. Here: the HTTP app and its routes (``http_api``), the streams of
a running service (``streams``) and the runner under them whose sources come and go
(``runner``), the tap that keeps each stream's latest frame and state (``tap``), the live
events hub (``event_hub``), the Prometheus exposition (``prometheus``), what an added stream may
read (``media_roots``), the static page (``web/``), and a service whose streams run in shard
processes: the parent's side (``sharded``: the service mode of the shard supervisor, on local
processes or Ray actors alike) and the shard's (``shard_side``).

May import: the runtime (``vapipe.pipeline``'s own modules), the shards' room
(``vapipe.shards``) and ``vapipe.stages`` (event records, drawing). Never the
commands (``vapipe.cli``).
"""
