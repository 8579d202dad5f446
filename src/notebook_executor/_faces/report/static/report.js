/* The index's and the notebook pages' one script: filter by notebook and status, sort a table by
   a column. The view lives in the address (#notebook=...&status=...&sort=...&dir=...). */
(function () {
  "use strict";
  var each = function (list, fn) { Array.prototype.forEach.call(list, fn); };
  var byNotebook = document.getElementById("filter-notebook");
  var byStatus = document.getElementById("filter-status");
  var shown = document.getElementById("shown-count");
  var tables = Array.prototype.slice.call(document.querySelectorAll("table.runs"));
  var sortKey = null, sortDir = 1;

  function heads(table) {
    var rows = table.tHead.rows;
    return Array.prototype.slice.call(rows[rows.length - 1].cells);
  }

  function apply() {
    var n = 0;
    each(document.querySelectorAll("section.notebook-runs"), function (section) {
      section.hidden = !!(byNotebook && byNotebook.value) &&
        section.getAttribute("data-notebook") !== byNotebook.value;
    });
    tables.forEach(function (table) {
      var inSection = table.closest("section");
      var off = inSection && inSection.hidden;
      var inTable = 0;
      each(table.tBodies[0].rows, function (row) {
        var ok = !byStatus.value || row.getAttribute("data-status") === byStatus.value;
        row.hidden = !ok;
        if (ok) { inTable += 1; }
        if (ok && !off) { n += 1; }
      });
      // A notebook with no run left by the filter is dropped from the view, not left empty.
      if (inSection && inSection.classList.contains("notebook-runs") && !inTable) {
        inSection.hidden = true;
      }
    });
    if (shown) { shown.textContent = String(n); }
    save();
  }

  function key(row, index) {
    var cell = row.cells[index];
    if (!cell) { return ""; }
    var v = cell.getAttribute("data-v");
    return v === null ? cell.textContent : v;
  }

  function sortTable(table, name, dir) {
    var cells = heads(table), index = -1;
    cells.forEach(function (th, i) {
      th.classList.remove("sorted-asc", "sorted-desc");
      if (th.getAttribute("data-key") === name) { index = i; }
    });
    if (index < 0) { return; }
    cells[index].classList.add(dir > 0 ? "sorted-asc" : "sorted-desc");
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = key(a, index), y = key(b, index);
      var nx = parseFloat(x), ny = parseFloat(y);
      var cmp = (!isNaN(nx) && !isNaN(ny)) ? nx - ny : x.localeCompare(y);
      return cmp * dir;
    });
    rows.forEach(function (row) { body.appendChild(row); });
  }

  function sortBy(name, dir) {
    sortKey = name; sortDir = dir;
    tables.forEach(function (table) { sortTable(table, name, dir); });
    save();
  }

  function save() {
    var parts = [];
    if (byNotebook && byNotebook.value) {
      parts.push("notebook=" + encodeURIComponent(byNotebook.value));
    }
    if (byStatus.value) { parts.push("status=" + encodeURIComponent(byStatus.value)); }
    if (sortKey !== null) {
      parts.push("sort=" + encodeURIComponent(sortKey));
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
    if (byNotebook && params.notebook !== undefined) { byNotebook.value = params.notebook; }
    if (params.status !== undefined) { byStatus.value = params.status; }
    if (params.sort !== undefined) { sortBy(params.sort, params.dir === "desc" ? -1 : 1); }
    apply();
  }

  tables.forEach(function (table) {
    heads(table).forEach(function (th) {
      th.classList.add("sortable");
      th.addEventListener("click", function () {
        var name = th.getAttribute("data-key");
        sortBy(name, sortKey === name ? -sortDir : 1);
      });
    });
  });
  if (byNotebook) { byNotebook.addEventListener("change", apply); }
  byStatus.addEventListener("change", apply);
  load();
  document.body.setAttribute("data-ready", "1");
})();
