"""The built-in stages, one subpackage per role. Each registers its type when imported;
``vapipe.pipeline.registry.BUILTIN_TYPES`` says which module that is, so that a run imports
only the stages its graph names."""
