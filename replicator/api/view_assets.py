"""The live view's style and script, inline in the page (no file to fetch: it works with no
network beyond the daemon), and the Content-Security-Policy that lets only these two run.

The script refreshes the page's live part every few seconds (`/view/live`, the same HTML the
server rendered) and draws the chart of the last hour as inline SVG from the samples the
live part carries (`data-samples`). It writes text into the SVG with `textContent` only."""

from __future__ import annotations

import base64
import hashlib

REFRESH_SECONDS = 5

STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 1em 2em; color: #222; background: #fff; }
h1 { font-size: 1.4em; margin: 0 0 .2em; }
h2 { font-size: 1.15em; margin: 1.4em 0 .4em; border-bottom: 1px solid #ddd; }
h3 { font-size: 1em; margin: 1em 0 .3em; }
table { border-collapse: collapse; margin: .3em 0; }
th, td { border: 1px solid #ddd; padding: .2em .5em; text-align: left; vertical-align: top; }
th { background: #f4f4f4; font-weight: 600; }
th .state, th .type { display: block; font-weight: normal; font-size: .85em; color: #555; }
code, pre { font-family: ui-monospace, monospace; font-size: .92em; }
pre { background: #f7f7f7; padding: .6em; overflow-x: auto; }
.note { color: #555; }
.cell-has { background: #e8f5e9; }
.cell-type { background: #fff3cd; }
.cell-renamed { background: #e3f2fd; }
.cell-lacks { background: #fdecea; color: #8a1c1c; }
.cell-extract, .cell-unknown { background: #f0f0f0; color: #555; }
.shard-paused, .shard-blocked { background: #fff8e1; }
.bad { color: #b00020; font-weight: 600; }
.good { color: #1b5e20; font-weight: 600; }
.chart { width: 100%; max-width: 760px; height: auto; display: block; margin: .3em 0; }
.chart text { font-size: 11px; fill: #444; }
.chart text.title { font-weight: 600; fill: #222; }
form.inline { display: inline; }
input[type=password] { width: 22em; }
"""

SCRIPT = """
(() => {
  "use strict";
  const REFRESH_MS = @REFRESH_MS@;
  const HOUR = 3600;
  const NS = "http://www.w3.org/2000/svg";
  const COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf"];

  function svg(name, attrs, text) {
    const node = document.createElementNS(NS, name);
    for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function number(v) {
    return v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2);
  }

  function ago(seconds) {
    return seconds >= 120 ? `${Math.round(seconds / 60)} min ago` : `${Math.round(seconds)} s ago`;
  }

  // One panel: a line per series from t0 to t1, its largest value on top.
  function panel(title, series, t0, t1) {
    const W = 640, H = 150, L = 52, R = 8, T = 26, B = 20;
    const span = Math.max(1, t1 - t0);
    let top = 0;
    for (const s of series) for (const p of s.points) if (p[1] !== null && p[1] > top) top = p[1];
    top = top > 0 ? top * 1.1 : 1;
    const x = (t) => L + (W - L - R) * (t - t0) / span;
    const y = (v) => T + (H - T - B) * (1 - v / top);
    const out = svg("svg", {viewBox: `0 0 ${W} ${H}`, class: "chart", role: "img", "aria-label": title});
    out.append(svg("rect", {x: L, y: T, width: W - L - R, height: H - T - B, fill: "none", stroke: "#ccc"}));
    out.append(svg("text", {x: 4, y: 13, class: "title"}, title));
    out.append(svg("text", {x: L - 4, y: T + 9, "text-anchor": "end"}, number(top)));
    out.append(svg("text", {x: L - 4, y: H - B, "text-anchor": "end"}, "0"));
    out.append(svg("text", {x: L, y: H - 5}, ago(t1 - t0)));
    out.append(svg("text", {x: W - R, y: H - 5, "text-anchor": "end"}, "last sample"));
    let legend = L + 220;
    for (const s of series) {
      const points = s.points.filter((p) => p[1] !== null && p[0] >= t0)
        .map((p) => `${x(p[0]).toFixed(1)},${y(p[1]).toFixed(1)}`);
      if (points.length > 1) {
        const line = {points: points.join(" "), fill: "none", stroke: s.color, "stroke-width": 1.5};
        out.append(svg("polyline", line));
      } else if (points.length === 1) {
        const [cx, cy] = points[0].split(",");
        out.append(svg("circle", {cx, cy, r: 2.5, fill: s.color}));
      }
      out.append(svg("text", {x: legend, y: 13, fill: s.color}, s.name));
      legend += 14 + 7 * s.name.length;
    }
    return out;
  }

  function draw() {
    const box = document.getElementById("chart");
    if (!box) return;
    const samples = JSON.parse(box.dataset.samples || "[]");
    box.replaceChildren();
    if (samples.length === 0) {
      const note = document.createElement("p");
      note.className = "note";
      note.textContent = `No sample yet: one is taken every ${box.dataset.every} s.`;
      box.append(note);
      return;
    }
    // (the last hour, or since the daemon started when that is less: its samples fill the width)
    const t1 = samples[samples.length - 1].time;
    const t0 = Math.min(t1 - 60, Math.max(t1 - HOUR, samples[0].time));
    const names = [...new Set(samples.flatMap((s) => Object.keys(s.lag)))].sort();
    const lag = names.map((name, i) => ({
      name, color: COLORS[i % COLORS.length],
      points: samples.map((s) => [s.time, name in s.lag ? s.lag[name] : null]),
    }));
    const rate = [{
      name: "rows/s", color: "#333",
      points: samples.slice(1).map((s, i) => {
        const before = samples[i];
        return [s.time, Math.max(0, (s.applied - before.applied) / Math.max(0.001, s.time - before.time))];
      }),
    }];
    box.append(panel("lag (s), by source", lag, t0, t1), panel("rows applied per second", rate, t0, t1));
    box.dataset.drawn = String(samples.length);
  }

  function say(text) {
    const line = document.getElementById("refreshed");
    if (line) line.textContent = text;
  }

  async function refresh() {
    try {
      const answer = await fetch("view/live", {credentials: "same-origin", cache: "no-store"});
      if (answer.status === 401) {
        location.reload();  // (the session ended: the page asks for the token again)
        return;
      }
      if (!answer.ok) throw new Error(`the daemon answered ${answer.status}`);
      const html = await answer.text();
      const live = document.getElementById("live");
      // (a section the reader opened or closed stays so)
      const open = new Map([...live.querySelectorAll("details[id]")].map((d) => [d.id, d.open]));
      live.innerHTML = html;
      for (const d of live.querySelectorAll("details[id]")) if (open.has(d.id)) d.open = open.get(d.id);
      draw();
      say("");
      document.body.dataset.refreshes = String(Number(document.body.dataset.refreshes || 0) + 1);
    } catch (err) {
      say(`Not refreshed (${err.message}); trying again in a few seconds.`);
    } finally {
      setTimeout(refresh, REFRESH_MS);
    }
  }

  draw();
  setTimeout(refresh, REFRESH_MS);
})();
""".replace("@REFRESH_MS@", str(REFRESH_SECONDS * 1000))


def _digest(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


# Only this script and style run; the page loads nothing (an icon included) and talks to
# its own origin only; nobody frames it.
CSP = (
    f"default-src 'none'; script-src {_digest(SCRIPT)}; style-src {_digest(STYLE)}; "
    "img-src data:; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
