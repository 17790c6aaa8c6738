"""The preprocess stage: letterbox geometry, the numpy path and the OpenCL kernel."""
