"""Models run on the objects a tracker carries: classify, detect inside, embed."""
