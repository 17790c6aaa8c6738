# mypy: ignore-errors
"""The RTSP server of the ``live`` node, run as a child process by the system's Python with
GStreamer's RTSP server (PyGObject, ``gir1.2-gst-rtsp-server-1.0``): it imports nothing of
vapipe, since the pipeline's own interpreter (a venv, another Python version) usually cannot
import the system's ``gi``.

    python3 rtsp_gst.py HOST PORT MOUNT...     (login, if any, in VAPIPE_RTSP_LOGIN=user:pass)

It reads access units from stdin, each as a header (keyframe: 1 byte, mount name length:
2 bytes, data length: 4 bytes, big-endian), the mount name and the H.264 access unit (Annex B),
and serves each mount at rtsp://HOST:PORT/MOUNT; a header whose first byte is 2 adds a mount
(a stream added to a running service) and is answered ``mounted MOUNT``. Every client gets a
media of its own (an ``appsrc`` fed the same units, which were encoded once), starting at a
keyframe; a client whose queue fills up skips to the next keyframe, and no other client
notices. It prints ``ready PORT`` once listening, and ``watch MOUNT COUNT`` whenever a
mount's clients change (the pipeline encodes a stream only while someone watches it) and
``key MOUNT`` when a new client waits for a keyframe.
"""

import os
import struct
import sys
import threading

import gi

gi.require_version("Gst", "1.0")
gi.require_version("GstRtspServer", "1.0")
from gi.repository import GLib, Gst, GstRtspServer  # noqa: E402

HEADER = struct.Struct(">BHI")
ANNOUNCE = 2
"""A header's first byte: 0 or 1, an access unit (1: a keyframe); 2, a new mount (no data)."""
QUEUED_MOST = 60
"""Access units a client may have waiting before it skips to the next keyframe."""
LAUNCH = (
    "( appsrc name=src is-live=true format=time do-timestamp=true "
    "caps=video/x-h264,stream-format=byte-stream,alignment=au ! "
    "h264parse config-interval=-1 ! rtph264pay name=pay0 pt=96 config-interval=-1 )"
)
lock = threading.Lock()
say_lock = threading.Lock()


def say(line: str) -> None:
    with say_lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


class Client:
    def __init__(self, src) -> None:
        self.src = src
        self.waiting = True  # for a keyframe


class Mount:
    def __init__(self, name: str) -> None:
        self.name = name
        self.clients: list[Client] = []

    def configure(self, factory, media) -> None:
        src = media.get_element().get_by_name("src")
        client = Client(src)
        with lock:
            self.clients.append(client)
            count = len(self.clients)
        media.connect("unprepared", lambda _media: self.gone(client))
        say(f"watch {self.name} {count}")
        say(f"key {self.name}")

    def gone(self, client: Client) -> None:
        with lock:
            if client in self.clients:
                self.clients.remove(client)
            count = len(self.clients)
        say(f"watch {self.name} {count}")

    def push(self, data: bytes, keyframe: bool) -> None:
        with lock:
            clients = list(self.clients)
        for client in clients:
            if keyframe:
                client.waiting = False
            if client.waiting:
                continue
            if client.src.get_property("current-level-buffers") >= QUEUED_MOST:
                client.waiting = True  # behind: skip to the next keyframe
                continue
            client.src.emit("push-buffer", Gst.Buffer.new_wrapped(data))


def require_login(server, factory, login: str) -> None:
    """Basic authentication: only ``user:password`` may play what ``factory`` serves (also
    the test camera's, tests/rtsp_server.py)."""
    user, _, password = login.partition(":")
    auth = GstRtspServer.RTSPAuth()
    token = GstRtspServer.RTSPToken()
    token.set_string(GstRtspServer.RTSP_TOKEN_MEDIA_FACTORY_ROLE, "viewer")
    auth.add_basic(GstRtspServer.RTSPAuth.make_basic(user, password), token)
    server.set_auth(auth)
    permissions = GstRtspServer.RTSPPermissions()
    permissions.add_role_from_structure(Gst.Structure.new_empty("viewer"))
    permissions.add_permission_for_role("viewer", "media.factory.access", True)
    permissions.add_permission_for_role("viewer", "media.factory.construct", True)
    factory.set_permissions(permissions)


def read_exactly(stream, size: int) -> bytes | None:
    data = b""
    while len(data) < size:
        chunk = stream.read(size - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def add_mount(server, mounts: dict, name: str, login: str | None) -> None:
    """Serves ``name`` at /NAME (a media of its own per client)."""
    mount = mounts[name] = Mount(name)
    factory = GstRtspServer.RTSPMediaFactory()
    factory.set_launch(LAUNCH)
    factory.set_shared(False)
    factory.connect("media-configure", mount.configure)
    if login:
        require_login(server, factory, login)
    server.get_mount_points().add_factory(f"/{name}", factory)


def feed(server, mounts: dict, login: str | None, loop) -> None:
    stream = sys.stdin.buffer
    while True:
        header = read_exactly(stream, HEADER.size)
        if header is None:
            break
        kind, name_size, size = HEADER.unpack(header)
        name = read_exactly(stream, name_size)
        data = read_exactly(stream, size)
        if name is None or data is None:
            break
        mount = mounts.get(name.decode())
        if kind == ANNOUNCE:
            if mount is None:  # a stream added while the pipeline runs
                add_mount(server, mounts, name.decode(), login)
            say(f"mounted {name.decode()}")
        elif mount is not None:
            mount.push(data, bool(kind))
    loop.quit()  # the pipeline closed its end: the run is over


def main() -> None:
    host, port, names = sys.argv[1], sys.argv[2], sys.argv[3:]
    Gst.init(None)
    server = GstRtspServer.RTSPServer()
    server.set_address(host)
    server.set_service(port)
    login = os.environ.get("VAPIPE_RTSP_LOGIN")
    mounts = {}
    for name in names:
        add_mount(server, mounts, name, login)
    if server.attach(None) == 0:
        sys.exit(f"cannot listen on {host}:{port}")
    loop = GLib.MainLoop()
    threading.Thread(target=feed, args=(server, mounts, login, loop), daemon=True).start()
    say(f"ready {server.get_bound_port()}")
    loop.run()


if __name__ == "__main__":
    main()
