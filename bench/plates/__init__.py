"""Generated licence plates on real vehicle cut-outs (``scenes.py``)."""
