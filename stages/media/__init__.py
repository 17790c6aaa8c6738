"""The media room: pictures and video files. ``encoder`` writes H.264 (fragmented, crash-safe,
segmented); ``draw`` annotates a frame as the video sink records it; ``drawn_clips`` encodes
held frames into a clip; ``files`` writes pictures and clips behind a queue and keeps them
within their retention; ``paths`` turns a sink's path template into file names."""
