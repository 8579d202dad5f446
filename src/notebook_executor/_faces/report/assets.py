"""The style sheet and the one script of a report, inlined into every page that needs them."""

from __future__ import annotations

__all__ = ["INDEX_SCRIPT", "PAGE_CSS", "SITE_CSS"]

SITE_CSS = """
:root { --ok: #1b7f3a; --bad: #b3261e; --run: #8a6d00; --line: #d7dbe0; --muted: #5b6470; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 0;
  color: #1d232a; background: #fafbfc; }
header.top { padding: 14px 22px; background: #fff; border-bottom: 1px solid var(--line); }
header.top h1 { font-size: 19px; margin: 0 0 4px; }
main { padding: 14px 22px 40px; }
.muted { color: var(--muted); }
.controls { display: flex; gap: 16px; align-items: center; flex-wrap: wrap; margin: 10px 0; }
.controls label { font-weight: 600; }
select { font: inherit; padding: 3px 6px; }
table { border-collapse: collapse; background: #fff; font-size: 13px; }
th, td { border: 1px solid var(--line); padding: 4px 7px; text-align: left; vertical-align: top;
  max-width: 28em; overflow-wrap: anywhere; }
th { background: #f0f2f5; position: sticky; top: 0; }
th.sortable { cursor: pointer; user-select: none; }
th.sorted-asc::after { content: " \\25B2"; } th.sorted-desc::after { content: " \\25BC"; }
tr.error td { background: #fdf0ef; }
tr.error td.status { color: var(--bad); font-weight: 700; }
tr.success td.status { color: var(--ok); font-weight: 600; }
tr.running td.status { color: var(--run); font-weight: 600; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
td.err { color: var(--bad); font-family: ui-monospace, monospace; font-size: 12px; }
.charts { display: flex; flex-wrap: wrap; gap: 14px; margin: 8px 0 18px; }
.chart-box { background: #fff; border: 1px solid var(--line); padding: 6px; }
.chart-box .nb { font-size: 12px; color: var(--muted); margin: 0 0 2px 4px; }
svg.chart .title { font-size: 13px; font-weight: 600; fill: #1d232a; }
svg.chart .tick { font-size: 11px; fill: var(--muted); }
svg.chart .axis { stroke: #9aa3ad; stroke-width: 1; }
svg.chart .line { fill: none; stroke: #2f6fdb; stroke-width: 1.6; }
svg.chart .dots circle { fill: #2f6fdb; }
.table-wrap { overflow: auto; max-height: 78vh; border: 1px solid var(--line); }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: 3px 14px; margin: 8px 0; }
dl.facts dt { font-weight: 600; color: var(--muted); }
dl.facts dd { margin: 0; overflow-wrap: anywhere; }
.badge { display: inline-block; padding: 1px 8px; border-radius: 10px; color: #fff;
  font-weight: 700; }
.badge.success { background: var(--ok); } .badge.error { background: var(--bad); }
.badge.running { background: var(--run); }
pre.failure { background: #fdf0ef; border: 1px solid #f1c4c0; padding: 8px; overflow: auto;
  white-space: pre-wrap; }
section.result { background: #fff; border-bottom: 1px solid var(--line); padding: 14px 22px; }
section.result h2 { font-size: 15px; margin: 14px 0 4px; }
"""

#: Enough of the notebook look for nbconvert's ``basic`` template (the classic class names).
PAGE_CSS = """
.notebook { padding: 10px 22px 40px; max-width: 1100px; }
.cell { margin: 10px 0; }
.input_prompt, .prompt { color: #303f9f; font-family: ui-monospace, monospace; font-size: 12px; }
.input_area { background: #f7f7f7; border: 1px solid #e0e0e0; border-radius: 2px;
  padding: 4px 8px; }
.input_area pre, .output_area pre { margin: 0; white-space: pre-wrap; overflow-wrap: anywhere;
  font: 12.5px/1.4 ui-monospace, SFMono-Regular, Menlo, monospace; }
.output_area { padding: 4px 8px; }
.output_error pre { background: #fdf0ef; }
.output_stderr pre { background: #fff5e6; }
.rendered_html table { border-collapse: collapse; }
.rendered_html td, .rendered_html th { border: 1px solid #ddd; padding: 2px 6px; }
.output_area img { max-width: 100%; }
.anchor-link { display: none; }
.ansi-red-fg { color: #b3261e; } .ansi-green-fg { color: #1b7f3a; }
.ansi-yellow-fg { color: #8a6d00; } .ansi-blue-fg { color: #2f6fdb; }
.ansi-cyan-fg { color: #0b7a8a; } .ansi-magenta-fg { color: #8a2f9a; }
.ansi-bold { font-weight: 700; }
"""

INDEX_SCRIPT = """
(function () {
  "use strict";
  var table = document.getElementById("runs");
  var body = table.tBodies[0];
  var rows = Array.prototype.slice.call(body.rows);
  var byNotebook = document.getElementById("filter-notebook");
  var byStatus = document.getElementById("filter-status");
  var shown = document.getElementById("shown-count");
  var heads = Array.prototype.slice.call(table.tHead.rows[0].cells);
  var sortKey = null, sortDir = 1;

  function apply() {
    var n = 0;
    rows.forEach(function (row) {
      var ok = (!byNotebook.value || row.getAttribute("data-notebook") === byNotebook.value) &&
               (!byStatus.value || row.getAttribute("data-status") === byStatus.value);
      row.hidden = !ok;
      if (ok) { n += 1; }
    });
    Array.prototype.forEach.call(document.querySelectorAll(".chart-box"), function (box) {
      box.hidden = !!byNotebook.value && box.getAttribute("data-notebook") !== byNotebook.value;
    });
    shown.textContent = String(n);
    save();
  }

  function key(row, index) {
    var cell = row.cells[index];
    if (!cell) { return ""; }
    var v = cell.getAttribute("data-v");
    return v === null ? cell.textContent : v;
  }

  function sortBy(index, dir) {
    sortKey = index; sortDir = dir;
    rows.sort(function (a, b) {
      var x = key(a, index), y = key(b, index);
      var nx = parseFloat(x), ny = parseFloat(y);
      var cmp = (!isNaN(nx) && !isNaN(ny) && String(nx) !== "NaN") ? nx - ny : x.localeCompare(y);
      return cmp * dir;
    });
    rows.forEach(function (row) { body.appendChild(row); });
    heads.forEach(function (th, i) {
      th.classList.remove("sorted-asc", "sorted-desc");
      if (i === index) { th.classList.add(dir > 0 ? "sorted-asc" : "sorted-desc"); }
    });
    save();
  }

  function save() {
    var parts = [];
    if (byNotebook.value) { parts.push("notebook=" + encodeURIComponent(byNotebook.value)); }
    if (byStatus.value) { parts.push("status=" + encodeURIComponent(byStatus.value)); }
    if (sortKey !== null) {
      parts.push("sort=" + encodeURIComponent(heads[sortKey].getAttribute("data-key")));
      parts.push("dir=" + (sortDir > 0 ? "asc" : "desc"));
    }
    try { history.replaceState(null, "", "#" + parts.join("&")); } catch (e) { /* file:// */ }
  }

  function load() {
    var params = {};
    location.hash.replace(/^#/, "").split("&").forEach(function (part) {
      var at = part.indexOf("=");
      if (at > 0) { params[part.slice(0, at)] = decodeURIComponent(part.slice(at + 1)); }
    });
    if (params.notebook !== undefined) { byNotebook.value = params.notebook; }
    if (params.status !== undefined) { byStatus.value = params.status; }
    if (params.sort !== undefined) {
      heads.forEach(function (th, i) {
        if (th.getAttribute("data-key") === params.sort) {
          sortBy(i, params.dir === "desc" ? -1 : 1);
        }
      });
    }
    apply();
  }

  heads.forEach(function (th, i) {
    th.classList.add("sortable");
    th.addEventListener("click", function () { sortBy(i, sortKey === i ? -sortDir : 1); });
  });
  byNotebook.addEventListener("change", apply);
  byStatus.addEventListener("change", apply);
  load();
  document.body.setAttribute("data-ready", "1");
})();
"""
