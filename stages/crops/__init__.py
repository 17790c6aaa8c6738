"""One crop library for every model run on objects: the nodes on tracked objects
(stages/objects) and the tracker's appearance option (stages/track/appearance.py) cut their
crops here (``cutter.Cropper``), every crop of a batch by one OpenCL kernel where a device
builds it (``opencl.py``), else with OpenCV (``warp.py``), from the decoded planes."""
