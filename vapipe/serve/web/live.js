// Live video in a stream's tile: the stream's fragmented MP4 (H.264, encoded once by the
// service whoever watches) read with fetch (it sends the token) and fed to Media Source
// Extensions. Played at the live edge: a tile that falls behind jumps ahead, and what it has
// shown is let go. The tile notes the latency of each picture shown: now minus the time the
// frame left its decoder (the service sends that clock as X-Live-Epoch).
"use strict";

const LIVE_EDGE_S = 0.1;
const BEHIND_MOST_S = 1.0;
const KEEP_S = 5;

function stopLive(entry) {
  if (!entry.live) return;
  entry.live.controller.abort();
  entry.live.video.remove();
  URL.revokeObjectURL(entry.live.video.src);
  entry.live = null;
  entry.element.classList.remove("playing");
  entry.element.querySelector(".live-button").textContent = "Live";
}

async function playLive(entry, id) {
  if (entry.live) { stopLive(entry); return; }
  const video = document.createElement("video");
  video.className = "live-video";
  video.muted = true;
  video.autoplay = true;
  video.playsInline = true;
  video.dataset.frames = "0";
  const media = new MediaSource();
  video.src = URL.createObjectURL(media);
  const controller = new AbortController();
  entry.live = { video, controller };
  entry.element.querySelector(".preview").appendChild(video);
  entry.element.classList.add("playing");
  entry.element.querySelector(".live-button").textContent = "Stop";
  const note = entry.element.querySelector(".latency");
  await new Promise((opened) => media.addEventListener("sourceopen", opened, { once: true }));
  let response;
  try {
    response = await api(`/streams/${encodeURIComponent(id)}/live.mp4`, { signal: controller.signal });
  } catch { stopLive(entry); return; }
  if (!response.ok) { note.textContent = await errorOf(response); stopLive(entry); return; }
  const epoch = parseFloat(response.headers.get("X-Live-Epoch"));
  const buffer = media.addSourceBuffer(response.headers.get("X-Live-Codec"));
  const waiting = [];
  const pump = () => {
    if (buffer.updating || !waiting.length || media.readyState !== "open") return;
    buffer.appendBuffer(waiting.shift());
  };
  buffer.addEventListener("updateend", () => {
    const held = video.buffered;
    if (held.length) {
      const end = held.end(held.length - 1);
      if (end - video.currentTime > BEHIND_MOST_S || video.currentTime < held.start(0)) {
        video.currentTime = Math.max(held.start(held.length - 1), end - LIVE_EDGE_S);
      }
      if (video.currentTime - held.start(0) > 2 * KEEP_S) {
        buffer.remove(0, video.currentTime - KEEP_S);
        return;  // its own updateend pumps on
      }
    }
    pump();
  });
  if (video.requestVideoFrameCallback) {
    const shown = (now, frame) => {
      const latency = Date.now() / 1000 - (epoch + frame.mediaTime);
      video.dataset.latency = latency.toFixed(3);
      video.dataset.frames = String(Number(video.dataset.frames) + 1);
      note.textContent = `${(latency * 1000).toFixed(0)} ms`;
      if (entry.live && entry.live.video === video) video.requestVideoFrameCallback(shown);
    };
    video.requestVideoFrameCallback(shown);
  }
  video.play().catch(() => {});
  const reader = response.body.getReader();
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      waiting.push(value);
      pump();
    }
  } catch { /* stopped, or the stream went away */ }
}
