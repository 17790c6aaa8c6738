"""The commands of ``run-pipeline``: ``run`` and its report (``main``, which also dispatches
the others), ``serve`` (``serve``), ``models`` (``models``), ``fetch``, ``doctor`` and
``stages`` (``tools``, with ``doctor`` the machine's report and ``reference`` the
configuration reference they print).

May import everything: the runtime, the service, the shards, the stages and the models. Nothing
else in the package imports this room.
"""
