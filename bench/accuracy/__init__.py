"""The accuracy benchmark: hand labels of the sample clips, generated sequences with exact
truth, and the code that scores counts and tracks against them (see README.md here)."""
