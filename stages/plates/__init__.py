"""Licence plates: text found and read on tracked vehicles (or a whole frame), voted per track
and matched against known plates."""
