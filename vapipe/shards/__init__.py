"""Shards: a run's sources split across processes (``[pipeline] shards = N``) or across the
actors of a Ray cluster (``cluster = "ray"``), past the GIL. Here: the parent's supervisor,
which starts, restarts and collects them (``supervisor``), how many shards and which sources
each runs (``plan``), the process they fork from (``forkserver``), one shard's run
(``worker``), what the parent has delivered and where a restarted shard resumes (``ledger``),
the merged stats (``stats``) and the Ray actors (``ray_actors``).

May import: the runtime (``vapipe.pipeline``'s own modules) and, lazily in a shard's run,
``vapipe.stages``. Never the service (``vapipe.serve``: a service's shard is run
through the class its job names) or the commands (``vapipe.cli``).
"""
