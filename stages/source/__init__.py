"""The source stage: files, still images, network streams and webcams; reconnect backoff."""
