// The service's page: live previews, stream states and counts, latest events, a form to add
// streams, a button to remove one, and a line/zone editor. Plain JS, no build step, no CDN.
"use strict";

const state = { token: sessionStorage.getItem("vapipe-token"), tiles: new Map(), points: [],
  locked: false };

// A 401 locks the page: one token form says why (none given, or a wrong one) and the page
// waits for it, sending nothing meanwhile. No prompt per request, no retry loop.
function lock(sentToken) {
  if (state.locked) return;
  state.locked = true;
  const form = document.getElementById("token-form");
  form.hidden = false;
  document.getElementById("token-message").textContent = sentToken
    ? "Wrong token: enter the service's token." : "This service needs its token.";
  document.getElementById("status").textContent = "locked";
  document.getElementById("token-input").focus();
}

// <img> and <video> cannot send the token: for /media/ the service takes it as this cookie.
function mediaCookie(token) {
  if (token) document.cookie = `vapipe_token=${encodeURIComponent(token)}; path=/media; SameSite=Strict`;
}

function unlock(token) {
  state.token = token;
  sessionStorage.setItem("vapipe-token", token);
  mediaCookie(token);
  state.locked = false;
  document.getElementById("token-form").hidden = true;
  refreshStreams();
  followEvents();
  if (typeof refreshHistory === "function") refreshHistory();
}

async function api(path, options = {}) {
  if (state.locked) return new Response(null, { status: 401, statusText: "locked" });
  const headers = Object.assign({}, options.headers || {});
  const sent = state.token;
  if (sent) headers.Authorization = `Bearer ${sent}`;
  const response = await fetch(path, Object.assign({}, options, { headers }));
  if (response.status === 401) lock(sent);
  return response;
}

async function errorOf(response) {
  try { return (await response.json()).error || response.statusText; }
  catch { return response.statusText; }
}

function tile(stream) {
  let entry = state.tiles.get(stream.id);
  if (!entry) {
    const element = document.createElement("article");
    element.className = "tile";
    element.dataset.stream = stream.id;
    // Until its first frame, a tile says so instead of a broken picture.
    element.innerHTML = `<div class="preview"><img alt="${stream.id}">` +
      `<span class="wait">waiting for the first frame…</span></div><div class="info"><b class="id"></b>` +
      `<span class="state"></span><span class="fps"></span><span class="counts"></span>` +
      `<button type="button" class="live-button">Live</button><span class="latency"></span>` +
      `<button type="button" class="remove">Remove</button></div>`;
    element.querySelector(".id").textContent = stream.id;
    element.querySelector(".remove").onclick = () => removeStream(stream.id);
    element.querySelector(".live-button").onclick = () => playLive(entry, stream.id);
    element.querySelector("img").onclick = () => openEditor(stream.id);
    document.getElementById("grid").appendChild(element);
    entry = { element, url: null, busy: false };
    state.tiles.set(stream.id, entry);
  }
  const stateText = entry.element.querySelector(".state");
  stateText.textContent = stream.state;
  stateText.className = `state state-${stream.state}`;
  entry.element.querySelector(".fps").textContent = `${stream.fps.toFixed(1)} fps`;
  const lines = (stream.counts && stream.counts.lines) || {};
  entry.element.querySelector(".counts").textContent = Object.entries(lines)
    .map(([name, c]) => `${name}: ` + Object.entries(c).filter(([k]) => k !== "by_class")
      .map(([k, v]) => `${k} ${v}`).join(" / ")).join("; ");
  return entry;
}

async function refreshStreams() {
  const response = await api("/api/streams");
  if (!response.ok) { document.getElementById("status").textContent = await errorOf(response); return; }
  const streams = await response.json();
  document.getElementById("status").textContent = `${streams.length} streams`;
  const ids = new Set(streams.map((s) => s.id));
  for (const [id, entry] of state.tiles) {
    if (!ids.has(id)) { entry.element.remove(); state.tiles.delete(id); }
  }
  streams.forEach(tile);
  if (typeof noteLines === "function") noteLines(streams);
}

async function refreshPreviews() {
  for (const [id, entry] of state.tiles) {
    if (entry.busy) continue;
    entry.busy = true;
    api(`/streams/${encodeURIComponent(id)}/snapshot.jpg`).then(async (response) => {
      if (response.ok) {
        const url = URL.createObjectURL(await response.blob());
        const img = entry.element.querySelector("img");
        img.onload = () => {
          if (entry.url) URL.revokeObjectURL(entry.url);
          entry.url = url;
          entry.element.classList.add("live");
        };
        img.src = url;
      }
    }).finally(() => { entry.busy = false; });
  }
}

async function followEvents() {
  // EventSource cannot send a token: the stream is read with fetch instead.
  if (state.following) return;
  const response = await api("/api/events");
  if (!response.ok) return;  // locked: unlocking follows again
  state.following = true;
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  const list = document.getElementById("events");
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      if (!block.startsWith("data: ")) continue;
      const event = JSON.parse(block.slice(6));
      if (event.event === "frame") continue;
      if (event.event === "source_removed" || event.event === "source_added") continue;
      list.querySelector(".empty")?.remove();
      list.prepend(card(event));  // history.js: a card with the event's picture
      while (list.children.length > 24) list.lastChild.remove();
    }
  }
  state.following = false;
}

async function addStream(form) {
  const data = new FormData(form);
  const body = { id: data.get("id"), uri: data.get("uri") };
  const errorText = document.getElementById("add-error");
  try {
    if (data.get("options")) body.options = JSON.parse(data.get("options"));
  } catch (problem) { errorText.textContent = `options: ${problem.message}`; return; }
  const response = await api("/api/streams", { method: "POST", body: JSON.stringify(body),
    headers: { "Content-Type": "application/json" } });
  errorText.textContent = response.ok ? "" : await errorOf(response);
  if (response.ok) { form.reset(); refreshStreams(); }
}

async function removeStream(id) {
  const response = await api(`/api/streams/${encodeURIComponent(id)}`, { method: "DELETE" });
  if (!response.ok) alert(await errorOf(response));
  refreshStreams();
}

function openEditor(id) {
  state.editing = id;
  state.points = [];
  const editor = document.getElementById("editor");
  editor.hidden = false;
  editor.scrollIntoView({ block: "nearest" });  // opened from a tile: where the eye is
  document.getElementById("editor-stream").textContent = id;
  document.getElementById("editor-picture").src = state.tiles.get(id).element.querySelector("img").src;
  drawPoints();
}

function drawPoints() {
  const svg = document.getElementById("editor-overlay");
  svg.setAttribute("viewBox", "0 0 1 1");
  svg.setAttribute("preserveAspectRatio", "none");
  const path = state.points.map(([x, y]) => `${x},${y}`).join(" ");
  svg.innerHTML = `<polyline points="${path}" fill="none" stroke="#0f0" stroke-width="0.006"/>`;
}

async function saveShape(kind) {
  const errorText = document.getElementById("editor-error");
  const name = document.getElementById("shape-name").value;
  const id = encodeURIComponent(state.editing);
  const current = await (await api(`/api/streams/${id}/analytics`)).json();
  if (kind === "line") {
    if (state.points.length !== 2) { errorText.textContent = "a line takes two points"; return; }
    current.lines = current.lines.filter((l) => l.name !== name);
    current.lines.push({ name, start: state.points[0], end: state.points[1], normalized: true });
  } else {
    current.zones = current.zones.filter((z) => z.name !== name);
    current.zones.push({ name, polygon: state.points, normalized: true });
  }
  const response = await api(`/api/streams/${id}/analytics`, { method: "PUT",
    body: JSON.stringify(current), headers: { "Content-Type": "application/json" } });
  errorText.textContent = response.ok ? `saved ${kind} '${name}'` : await errorOf(response);
  errorText.className = response.ok ? "ok" : "error";
  if (response.ok) { state.points = []; drawPoints(); }
}

document.getElementById("editor-picture").addEventListener("click", (click) => {
  const box = click.target.getBoundingClientRect();
  const x = (click.clientX - box.left) / box.width;
  const y = (click.clientY - box.top) / box.height;
  state.points.push([Number(x.toFixed(4)), Number(y.toFixed(4))]);
  drawPoints();
});
document.getElementById("save-line").onclick = () => saveShape("line");
document.getElementById("save-zone").onclick = () => saveShape("zone");
document.getElementById("clear-points").onclick = () => { state.points = []; drawPoints(); };
document.getElementById("close-editor").onclick = () => { document.getElementById("editor").hidden = true; };
document.getElementById("token-form").addEventListener("submit", (submit) => {
  submit.preventDefault();
  unlock(document.getElementById("token-input").value);
});
document.getElementById("add").addEventListener("submit", (submit) => {
  submit.preventDefault();
  addStream(submit.target);
});

mediaCookie(state.token);
refreshStreams().then(refreshPreviews);
setInterval(refreshStreams, 1000);
setInterval(refreshPreviews, 500);
followEvents();
