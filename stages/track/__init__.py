"""The track stage: ByteTrack-style multi-object tracking per source."""
