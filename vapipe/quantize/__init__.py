"""``run-pipeline models quantize``: INT8 and FP16 copies of a model, calibrated on the
user's own footage through the pipeline's source and preprocessing (quantize.py), with the
frames and agreement measures (calibration.py) and the per-node noise (sensitivity.py)."""
