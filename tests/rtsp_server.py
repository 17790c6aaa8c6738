"""A local RTSP server for the tests: serves one H.264 MP4 at rtsp://127.0.0.1:PORT/stream.

Runs with Debian's Python and GStreamer (python3-gi, gir1.2-gst-rtsp-server-1.0, the good and
bad plugin sets): ``/usr/bin/python3 tests/rtsp_server.py PORT CLIP [USER:PASSWORD]``. PORT 0
lets the server bind a free port itself (no race with another process); it prints
``ready PORT`` once listening. Frames are sent at the clip's own pace, SPS/PPS with every
keyframe (so a client that reconnects can decode again); the stream ends when the clip does.

Each client gets a session of its own, from the clip's start, as a camera gives each viewer
one: a shared media (GStreamer's ``set_shared``) let two clients that connected at once on a
loaded machine break it for good (every later DESCRIBE failed: "Invalid data found").
"""

import sys
from pathlib import Path

import gi

gi.require_version("Gst", "1.0")
gi.require_version("GstRtspServer", "1.0")
from gi.repository import GLib, Gst, GstRtspServer  # noqa: E402

# Basic authentication as the live node's own RTSP server does it (stages/media/rtsp_gst.py,
# also run by the system's Python): beside this file in the camera image, else in the tree.
HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "stages" / "media")]
from rtsp_gst import require_login  # noqa: E402


def main() -> None:
    port, clip = sys.argv[1], sys.argv[2]
    login = sys.argv[3] if len(sys.argv) > 3 else None
    Gst.init(None)
    server = GstRtspServer.RTSPServer()
    server.set_address("127.0.0.1")
    server.set_service(port)
    factory = GstRtspServer.RTSPMediaFactory()
    factory.set_launch(
        f"( filesrc location={clip} ! qtdemux ! h264parse ! "
        "rtph264pay name=pay0 pt=96 config-interval=-1 )"
    )
    factory.set_shared(False)
    if login:
        require_login(server, factory, login)
    server.get_mount_points().add_factory("/stream", factory)
    if server.attach(None) == 0:
        sys.exit(f"cannot listen on 127.0.0.1:{port}")
    print(f"ready {server.get_bound_port()}", flush=True)
    GLib.MainLoop().run()


if __name__ == "__main__":
    main()
