// The page's history half: past events as pictures (a click shows the snapshot and plays the
// clip from the event's moment), and a line's counts per bucket as an SVG chart, both read
// from the service's event history. Plain JS, no build step, no CDN.
"use strict";

const past = { lines: new Set() };

function mediaUrl(path) {
  return "/media/" + path.split("/").map(encodeURIComponent).join("/");
}

// What models on the object said (a classifier's label, a gallery's name), as "cab alice".
function tags(event) {
  return Object.values(event.attributes || {})
    .map((value) => value && (value.label || value.name))
    .filter((tag) => typeof tag === "string")
    .join(" ");
}

function describe(event) {
  const when = new Date(event.time).toLocaleString();
  const where = event.line ? `${event.line} ${event.direction}` : (event.zone || "");
  const what = event.class_name ? `${event.class_name}${event.track_id != null ? " #" + event.track_id : ""}` : "";
  const said = tags(event);
  return `${when} · ${event.source_id} · ${event.event.replace("_", " ")} ${where} ${what}${said ? " · " + said : ""}`.trim();
}

function card(event) {
  const item = document.createElement("li");
  item.className = "event";
  item.dataset.id = event.id || "";
  const picture = event.snapshot_crop || event.snapshot;
  if (picture) {
    const img = document.createElement("img");
    img.alt = event.class_name || event.event;
    img.src = mediaUrl(picture);
    item.appendChild(img);
  }
  // What happened, to what, when: three short lines a glance reads, not one raw line.
  const type = event.event.replace("_", " ");
  const where = event.line ? `${event.line} · ${event.direction}` : (event.zone || "");
  const who = event.class_name
    ? `${event.class_name}${event.track_id != null ? " #" + event.track_id : ""}` : "";
  const said = tags(event);
  const time = new Date(event.time).toLocaleTimeString();
  for (const [name, text] of [["what", where ? `${type}: ${where}` : type],
    ["who", [who, said].filter(Boolean).join(" · ")], ["when", `${time} · ${event.source_id}`]]) {
    if (!text) continue;
    const line = document.createElement("span");
    line.className = name;
    line.textContent = text;
    item.appendChild(line);
  }
  item.title = describe(event);
  item.onclick = () => openEvent(event);
  return item;
}

function openEvent(event) {
  document.getElementById("event-title").textContent = describe(event);
  const img = document.getElementById("event-snapshot");
  img.hidden = !event.snapshot;
  if (event.snapshot) img.src = mediaUrl(event.snapshot);
  const video = document.getElementById("event-clip");
  const note = document.getElementById("event-note");
  note.textContent = "";
  video.hidden = !event.clip;
  video.onerror = () => {
    // Written once post_s has passed (or when its stream is removed): not there yet.
    note.textContent = "The clip is still being recorded; try again in a few seconds.";
    video.hidden = true;
  };
  if (event.clip) {
    video.onloadedmetadata = () => {
      video.currentTime = Math.max(0, (event.clip_at_s || 0) - 1);  // a second before it
      video.play().catch(() => {});
    };
    video.src = mediaUrl(event.clip);
  } else {
    video.removeAttribute("src");
  }
  document.getElementById("event-view").showModal();
}

async function loadHistory() {
  const form = document.getElementById("history-filters");
  const params = new URLSearchParams({ limit: "60" });
  for (const name of ["source", "type", "line", "zone", "attribute"]) {
    const value = form.elements[name].value.trim();
    if (value) params.set(name, value);
  }
  const minutes = form.elements.since.value;
  if (minutes) params.set("since", String(Date.now() / 1000 - Number(minutes) * 60));
  const response = await api(`/api/events/history?${params}`);
  const note = document.getElementById("history-note");
  if (!response.ok) { note.textContent = await errorOf(response); return; }
  const body = await response.json();
  const list = document.getElementById("history");
  const ids = body.events.map((e) => e.id || "").join("|");
  if (list.dataset.ids === ids) return;  // unchanged: the pictures are not loaded again
  list.dataset.ids = ids;
  note.textContent = body.events.length ? "" : "No events in this time.";
  list.replaceChildren(...body.events.map(card));
  for (const event of body.events) if (event.line) noteLine(event.line);
}

function noteLine(name) {
  if (past.lines.has(name)) return;
  past.lines.add(name);
  const option = document.createElement("option");
  option.textContent = name;
  document.getElementById("chart-line").appendChild(option);
  if (past.lines.size === 1) loadCounts();
}

function noteLines(streams) {
  for (const stream of streams) {
    for (const name of Object.keys((stream.counts && stream.counts.lines) || {})) noteLine(name);
  }
}

async function loadCounts() {
  const line = document.getElementById("chart-line").value;
  const note = document.getElementById("chart-note");
  if (!line) { note.textContent = "No line yet."; return; }
  const bucket = document.getElementById("chart-bucket").value;
  const hours = Number(document.getElementById("chart-hours").value);
  const since = Date.now() / 1000 - hours * 3600;
  const query = new URLSearchParams({ line, bucket, since: String(since) });
  const response = await api(`/api/counts?${query}`);
  if (!response.ok) { note.textContent = await errorOf(response); return; }
  const body = await response.json();
  drawChart(body, since);
  const total = body.buckets.reduce((sum, b) => sum + b.total, 0);
  note.textContent = `${line}: ${total} crossings in ${body.buckets.length} buckets of ${bucket}`;
}

const COLOURS = ["#6af", "#fa6", "#7c7", "#d6d", "#dd6"];

function drawChart(body, since) {
  const svg = document.getElementById("chart");
  const [width, height, left, bottom] = [640, 240, 36, 22];
  const buckets = body.buckets;
  const directions = [...new Set(buckets.flatMap((b) => Object.keys(b.counts)))].sort();
  const count = (b, d) => Object.values(b.counts[d] || {}).reduce((s, n) => s + n, 0);
  const top = Math.max(1, ...buckets.flatMap((b) => directions.map((d) => count(b, d))));
  const last = Math.max(Date.now() / 1000, ...buckets.map((b) => b.start + body.bucket_s));
  // From the first bucket with crossings (at least a dozen buckets wide), not from `since`:
  // a day of 5-minute buckets that began an hour ago is not squeezed into the right edge.
  const earliest = buckets.length ? Math.max(since, buckets[0].start) : since;
  const first = Math.min(earliest, last - 12 * body.bucket_s);
  const label = (t) => (last - first > 86400 ? new Date(t * 1000).toLocaleString()
    : new Date(t * 1000).toLocaleTimeString());
  const x = (t) => left + (width - left - 8) * (t - first) / (last - first);
  const y = (n) => height - bottom - (height - bottom - 10) * n / top;
  const parts = [`<line x1="${left}" y1="${y(0)}" x2="${width - 8}" y2="${y(0)}" stroke="#555"/>`,
    `<text x="4" y="${y(top) + 4}">${top}</text><text x="4" y="${y(0)}">0</text>`,
    `<text x="${left}" y="${height - 6}">${label(first)}</text>`,
    `<text x="${width - 8}" y="${height - 6}" text-anchor="end">${label(last)}</text>`];
  directions.forEach((direction, index) => {
    const colour = COLOURS[index % COLOURS.length];
    const points = buckets.map((b) => [x(b.start + body.bucket_s / 2), y(count(b, direction))]);
    parts.push(`<polyline fill="none" stroke="${colour}" stroke-width="2" points="${points.map((p) => p.join(",")).join(" ")}"/>`);
    for (const [i, [px, py]] of points.entries()) {
      parts.push(`<circle class="point" data-direction="${direction}" cx="${px}" cy="${py}" r="3" fill="${colour}"><title>${direction}: ${count(buckets[i], direction)}</title></circle>`);
    }
    parts.push(`<text x="${left + 8 + index * 110}" y="14" fill="${colour}">● ${direction}</text>`);
  });
  svg.innerHTML = parts.join("");
}

function refreshHistory() {
  loadHistory();
  loadCounts();
}

for (const element of document.querySelectorAll("#history-filters input, #history-filters select")) {
  element.addEventListener("change", loadHistory);
}
for (const id of ["chart-line", "chart-bucket", "chart-hours"]) {
  document.getElementById(id).addEventListener("change", loadCounts);
}
refreshHistory();
setInterval(loadHistory, 5000);
setInterval(loadCounts, 10000);
