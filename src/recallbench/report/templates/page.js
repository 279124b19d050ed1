// recallbench report and comparison pages: plain JavaScript, no framework, no network.
// Every string of the data is inserted as text (textContent), never as markup.
(function () {
  "use strict";
  var DATA = JSON.parse(document.getElementById("rb-data").textContent);
  var LABELS = {};
  DATA.categories.forEach(function (c) { LABELS[c[0]] = c[1]; });
  // the texts of each query: a record per query (its own pool of texts in `texts`), those of
  // the first queries in this page, the others in the data files beside it, read on demand
  var RECORDS = {};
  var UNITS = {};       // scope + NUL + unit -> [scope, unit, text] of every loaded record
  var CHUNKS = {};      // data file number -> "loading" | "loaded" | an error message
  var WAITING = {};     // data file number -> callbacks waiting for it
  var LISTENERS = [];   // called when any data file is read (or fails)

  function addRecord(r) {
    RECORDS[r.id] = r;
    function unit(id, index) {
      if (index === null || index === undefined) { return; }
      var key = r.scope + "\u0000" + id;
      if (!UNITS[key]) { UNITS[key] = [r.scope, id, r.texts[index]]; }
    }
    r.expected.forEach(function (e) { unit(e[0], e[e.length - 1]); });
    (r.returned || []).forEach(function (h) { unit(h[0], h[3]); });
    (r.systems || []).forEach(function (s) { if (s) { s.returned.forEach(function (h) { unit(h[0], h[3]); }); } });
    (r.units || []).forEach(function (u) { unit(u[0], u[1]); });
  }
  DATA.inline.forEach(addRecord);

  function chunkPath(n) { return DATA.chunks.dir + "/" + DATA.chunks.files[n - 1]; }

  function settle(n, state) {
    CHUNKS[n] = state;
    var waiting = WAITING[n] || [];
    delete WAITING[n];
    waiting.forEach(function (done) { done(state === "loaded" ? null : state); });
    LISTENERS.forEach(function (listener) { listener(); });
  }

  // each data file calls this with its page's kind and token, its number and its records
  window.recallbenchPageData = function (kind, token, n, records) {
    var script = document.currentScript;
    var asked = script ? Number(script.getAttribute("data-chunk")) : n;
    if (kind !== DATA.kind || token !== DATA.chunks.token || n !== asked) {
      settle(asked, chunkPath(asked) + " is not this page's data file (it belongs to another " + kind + " page); write the page again with recallbench");
      return;
    }
    records.forEach(addRecord);
    settle(n, "loaded");
  };

  // call done(null) once data file n (0: this page) is read, done(message) if it cannot be
  function need(n, done) {
    if (!n || CHUNKS[n] === "loaded") { done(null); return; }
    if (CHUNKS[n] && CHUNKS[n] !== "loading") { done(CHUNKS[n]); return; }
    (WAITING[n] = WAITING[n] || []).push(done);
    if (CHUNKS[n] === "loading") { return; }
    CHUNKS[n] = "loading";
    var script = document.createElement("script");
    script.src = chunkPath(n);
    script.setAttribute("data-chunk", String(n));
    script.onerror = function () {
      settle(n, "Could not read " + chunkPath(n) + " (beside this page): the data files in " + DATA.chunks.dir + "/ must travel with the page.");
    };
    script.onload = function () {
      if (CHUNKS[n] === "loading") { settle(n, chunkPath(n) + " did not register this page's data (a damaged or foreign file); write the page again with recallbench"); }
    };
    document.body.appendChild(script);
  }
  // control, format and surrogate characters (not newline and tab): shown as U+XXXX
  var CONTROL = /[\u0000-\u0008\u000B-\u001F\u007F-\u009F\u00AD\u0600-\u0605\u061C\u06DD\u070F\u180E\u200B-\u200F\u202A-\u202E\u2060-\u2064\u2066-\u206F\uFEFF\uFFF9-\uFFFB\uD800-\uDFFF]/;

  function el(tag, attrs, children) {
    var node = document.createElement(tag);
    if (attrs) {
      Object.keys(attrs).forEach(function (key) {
        if (key === "text") { node.textContent = attrs[key]; }
        else if (key === "cls") { node.className = attrs[key]; }
        else { node.setAttribute(key, attrs[key]); }
      });
    }
    (children || []).forEach(function (child) {
      if (child === null || child === undefined) { return; }
      node.appendChild(typeof child === "string" ? document.createTextNode(child) : child);
    });
    return node;
  }

  function isControl(ch) {
    if (ch.length === 2) { return /[\uDB40][\uDC01-\uDC7F]/.test(ch); } // tag characters
    return CONTROL.test(ch);
  }

  // `text` into `node`: control characters as visible U+XXXX marks
  function appendVisible(node, text) {
    var chars = Array.from(text);
    var run = "";
    chars.forEach(function (ch) {
      if (isControl(ch)) {
        if (run) { node.appendChild(document.createTextNode(run)); run = ""; }
        var code = ch.codePointAt(0).toString(16).toUpperCase();
        while (code.length < 4) { code = "0" + code; }
        node.appendChild(el("span", { cls: "ctl", text: "U+" + code, title: "invisible character U+" + code }));
      } else {
        run += ch;
      }
    });
    if (run) { node.appendChild(document.createTextNode(run)); }
  }

  function visibleSpan(text, cls) {
    var span = el("span", { cls: cls || "" });
    appendVisible(span, String(text));
    return span;
  }

  // a text of a record's pool, shortened to DATA.short characters with a button to show all
  function textBlock(pool, index, cls) {
    if (index === null || index === undefined) {
      return el("span", { cls: "muted", text: "(text not in this page)" });
    }
    var text = pool[index];
    var box = el("div", { cls: "text" + (cls ? " " + cls : ""), dir: "auto" });
    var chars = Array.from(text);
    if (chars.length <= DATA.short) {
      appendVisible(box, text);
      return box;
    }
    var body = el("span");
    var button = el("button", { cls: "more", type: "button" });
    var open = false;
    function draw() {
      body.textContent = "";
      appendVisible(body, open ? text : chars.slice(0, DATA.short).join("") + "\u2026");
      button.textContent = open ? "show less" : "show all (" + chars.length.toLocaleString("en-US") + " characters)";
      button.setAttribute("aria-expanded", open ? "true" : "false");
    }
    button.addEventListener("click", function (event) { event.stopPropagation(); open = !open; draw(); });
    draw();
    box.appendChild(body);
    box.appendChild(button);
    return box;
  }

  function fmt(x, digits) {
    if (x === null || x === undefined) { return "n/a"; }
    return x.toFixed(digits === undefined ? 3 : digits);
  }

  function signed(x) {
    if (x === null || x === undefined) { return "n/a"; }
    return (x > 0 ? "+" : x < 0 ? "\u2212" : "\u00b1") + Math.abs(x).toFixed(3);
  }

  function lower(s) { return String(s).toLowerCase(); }

  // --- a sortable, filterable table of queries ------------------------------------------
  // columns: {key, label, num, cell(q) -> node or string, value(q) -> sort value}
  function QueryTable(table, columns, detail, countNode, total) {
    this.table = table;
    this.columns = columns;
    this.detail = detail;
    this.countNode = countNode;
    this.total = total;
    this.sortKey = null;
    this.sortDir = 1;
    this.open = {};
    this.rows = [];
    var self = this;
    var tr = el("tr");
    columns.forEach(function (col) {
      var th = el("th", { cls: "sortable", scope: "col", tabindex: "0", "data-key": col.key, text: col.label });
      th.addEventListener("click", function () { self.sortBy(col.key); });
      th.addEventListener("keydown", function (e) { if (e.key === "Enter" || e.key === " ") { e.preventDefault(); self.sortBy(col.key); } });
      tr.appendChild(th);
    });
    table.tHead.appendChild(tr);
  }

  QueryTable.prototype.sortBy = function (key) {
    if (this.sortKey === key) { this.sortDir = -this.sortDir; } else { this.sortKey = key; this.sortDir = 1; }
    var self = this;
    Array.prototype.forEach.call(this.table.tHead.rows[0].cells, function (th) {
      if (th.getAttribute("data-key") === key) { th.setAttribute("aria-sort", self.sortDir > 0 ? "ascending" : "descending"); }
      else { th.removeAttribute("aria-sort"); }
    });
    this.draw(this.rows);
  };

  QueryTable.prototype.sorted = function (rows) {
    if (!this.sortKey) { return rows; }
    var col = this.columns.filter(function (c) { return c.key === this.sortKey; }, this)[0];
    var dir = this.sortDir;
    return rows.map(function (q, i) { return [q, col.value(q), i]; }).sort(function (a, b) {
      var x = a[1], y = b[1];
      var xn = x === null || x === undefined, yn = y === null || y === undefined;
      if (xn || yn) { return xn && yn ? a[2] - b[2] : xn ? 1 : -1; } // n/a last, both ways
      if (x < y) { return -dir; }
      if (x > y) { return dir; }
      return a[2] - b[2];
    }).map(function (t) { return t[0]; });
  };

  QueryTable.prototype.draw = function (rows) {
    this.rows = rows;
    var body = this.table.tBodies[0];
    body.textContent = "";
    var self = this;
    var n = this.columns.length;
    this.sorted(rows).forEach(function (q) {
      var tr = el("tr", { cls: "qrow", tabindex: "0", "data-qid": q.id });
      self.columns.forEach(function (col) {
        var content = col.cell(q);
        var td = el("td", { cls: (col.num ? "num" : "") + (col.key === "id" ? " id" : "") });
        td.appendChild(typeof content === "string" ? visibleSpan(content) : content);
        tr.appendChild(td);
      });
      var extra = null;
      function toggle() {
        if (extra) {
          extra.remove(); extra = null; delete self.open[q.id];
          tr.classList.remove("open"); tr.setAttribute("aria-expanded", "false");
          return;
        }
        var td = el("td", { colspan: String(n), cls: "detail" });
        td.appendChild(self.detail(q));
        extra = el("tr", { cls: "detail", "data-qid": q.id }, [td]);
        tr.after(extra);
        self.open[q.id] = true;
        tr.classList.add("open"); tr.setAttribute("aria-expanded", "true");
      }
      tr.addEventListener("click", toggle);
      tr.addEventListener("keydown", function (e) { if (e.key === "Enter") { toggle(); } });
      tr.setAttribute("aria-expanded", "false");
      body.appendChild(tr);
      if (self.open[q.id]) { toggle(); }
    });
    this.countNode.textContent = "showing " + rows.length.toLocaleString("en-US") + " of " + this.total.toLocaleString("en-US") + " queries";
  };

  function matches(q, needle) {
    if (!needle) { return true; }
    if (lower(q.id).indexOf(needle) >= 0) { return true; }
    return q.text !== null && lower(q.text).indexOf(needle) >= 0;
  }

  // the opened query's detail: drawn at once from a loaded record, else once its data
  // file is read; a file that cannot be read is named, and the row's figures stay shown
  function withRecord(q, draw) {
    var box = el("div", { cls: "detail" });
    function show(error) {
      box.textContent = "";
      var rec = RECORDS[q.id];
      if (rec) { draw(box, rec); return; }
      box.appendChild(el("h3", null, [visibleSpan(q.id, "id")]));
      box.appendChild(el("p", { cls: "meta" }, ["category ", visibleSpan(LABELS[q.cat] || q.cat), " \u00b7 scope ", visibleSpan(q.scope, "id")]));
      box.appendChild(el("p", { cls: "warning data-error" }, [visibleSpan(error || ("The texts of this query are not in " + chunkPath(q.c) + "."))]));
    }
    if (RECORDS[q.id]) { show(null); return box; }
    box.appendChild(el("p", { cls: "muted loading", text: "Reading the texts of this query from " + chunkPath(q.c) + "\u2026" }));
    need(q.c, show);
    return box;
  }

  function gradeRow(cells, grade) {
    return el("tr", { cls: "g" + grade }, cells.map(function (c) {
      return c instanceof Node ? el("td", null, [c]) : el("td", { cls: c.cls || "" }, [c.node]);
    }));
  }

  function simpleTable(headers, rows) {
    var head = el("tr", null, headers.map(function (h) { return el("th", { text: h }); }));
    return el("div", { cls: "scroll" }, [el("table", { cls: "data" }, [el("thead", null, [head]), el("tbody", null, rows)])]);
  }

  function questionBlock(box, q, rec) {
    box.appendChild(el("h3", null, [visibleSpan(q.id, "id")]));
    box.appendChild(el("p", { cls: "meta" }, ["category " , visibleSpan(LABELS[q.cat] || q.cat), " \u00b7 scope ", visibleSpan(q.scope, "id")]));
    box.appendChild(el("div", { cls: "question" }, [textBlock(rec.texts, rec.text)]));
    if (rec.notes) { box.appendChild(el("p", { cls: "note" }, ["notes: ", visibleSpan(rec.notes)])); }
  }

  function returnedRows(list, pool) {
    return list.map(function (h, i) {
      return gradeRow([
        { node: document.createTextNode(String(i + 1)), cls: "num" },
        visibleSpan(h[0], "id"),
        { node: document.createTextNode(String(h[1])), cls: "num" },
        { node: document.createTextNode(fmt(h[2], 4)), cls: "num" },
        textBlock(pool, h[3])
      ], h[1]);
    });
  }

  function whyBlock(why) {
    if (!why.length) { return el("p", { cls: "muted", text: "No relevant item was missed." }); }
    return el("ul", { cls: "why" }, why.map(function (w) { return el("li", null, [visibleSpan(w)]); }));
  }

  // --- report.html ------------------------------------------------------------------------
  function outcome(q) {
    if (!q.rel) { return "none"; }
    return q.missed.length ? "miss" : "hit";
  }
  var OUTCOME_TEXT = { hit: "hit", miss: "miss", none: "none to find" };

  function reportDetail(q) {
    return withRecord(q, function (box, rec) { drawReportDetail(box, q, rec); });
  }

  function drawReportDetail(box, q, rec) {
    var k = DATA.k;
    questionBlock(box, q, rec);
    box.appendChild(el("h3", { text: "Expected (" + rec.expected.length + "; " + q.rel + " relevant, grade 2 or 3)" }));
    if (rec.expected.length) {
      box.appendChild(simpleTable(["id", "grade", "rank", "text"], rec.expected.map(function (e) {
        var rank = e[2] === null ? (e[1] >= 2 ? "not returned" : "not in top-" + k) : String(e[2]) + (e[2] > k ? " (beyond top-" + k + ")" : "");
        return gradeRow([visibleSpan(e[0], "id"), { node: document.createTextNode(String(e[1])), cls: "num" },
          { node: document.createTextNode(rank), cls: "num" }, textBlock(rec.texts, e[3])], e[1]);
      })));
    } else {
      box.appendChild(el("p", { cls: "muted", text: "Nothing is graded for this query: every returned item is a false positive." }));
    }
    box.appendChild(el("h3", { text: "Returned top-" + k + " (" + rec.returned.length + ")" }));
    box.appendChild(simpleTable(["rank", "id", "grade", "score", "text"], returnedRows(rec.returned, rec.texts)));
    box.appendChild(el("h3", { text: "Lexical match" }));
    box.appendChild(el("p", { text: rec.lexical ? rec.lexical.matcher + " matched " + rec.lexical.count + (rec.lexical.count === 1 ? " memory" : " memories") + " for this query (a diagnostic, never scored)." : "The system has no lexical matcher to ask." }));
    box.appendChild(el("h3", { text: "Why relevant items were missed" }));
    box.appendChild(whyBlock(rec.why));
  }

  function startReport() {
    var columns = [
      { key: "id", label: "query", cell: function (q) { return q.id; }, value: function (q) { return q.id; } },
      { key: "cat", label: "category", cell: function (q) { return LABELS[q.cat] || q.cat; }, value: function (q) { return DATA.categories.map(function (c) { return c[0]; }).indexOf(q.cat); } }
    ];
    DATA.measures.forEach(function (name, i) {
      columns.push({ key: "m" + i, label: name, num: true, cell: function (q) { return fmt(q.m[i]); }, value: function (q) { return q.m[i]; } });
    });
    columns.push({ key: "found", label: "found", num: true, cell: function (q) { return q.rel ? (q.rel - q.missed.length) + "/" + q.rel : "\u2013"; }, value: function (q) { return q.rel ? (q.rel - q.missed.length) / q.rel : null; } });
    columns.push({ key: "outcome", label: "hit/miss", cell: function (q) { var o = outcome(q); return el("span", { cls: o, text: OUTCOME_TEXT[o] }); }, value: function (q) { return outcome(q); } });
    columns.push({ key: "first", label: "first relevant rank", num: true, cell: function (q) { return q.first === null ? (q.rel ? "not returned" : "\u2013") : String(q.first); }, value: function (q) { return q.first; } });
    var table = new QueryTable(document.getElementById("q-table"), columns, reportDetail, document.getElementById("q-count"), DATA.queries.length);
    var cat = document.getElementById("f-cat"), out = document.getElementById("f-outcome"), search = document.getElementById("f-search");
    function apply() {
      var needle = lower(search.value.trim());
      table.draw(DATA.queries.filter(function (q) {
        return (!cat.value || q.cat === cat.value) && (!out.value || outcome(q) === out.value) && matches(q, needle);
      }));
    }
    [cat, out].forEach(function (n) { n.addEventListener("change", apply); });
    search.addEventListener("input", apply);
    apply();
    startTexts();
  }

  function startTexts() {
    var search = document.getElementById("t-search");
    var table = document.getElementById("t-table");
    var count = document.getElementById("t-count");
    var load = document.getElementById("t-load");
    var status = document.getElementById("t-status");
    if (!search) { return; }
    var LIMIT = 200;
    var files = DATA.chunks.files.length;
    function apply() {
      var needle = lower(search.value.trim());
      var units = Object.keys(UNITS).sort().map(function (key) { return UNITS[key]; });
      var hits = units.filter(function (u) {
        return !needle || lower(u[1]).indexOf(needle) >= 0 || lower(u[2]).indexOf(needle) >= 0;
      });
      var body = table.tBodies[0];
      body.textContent = "";
      hits.slice(0, LIMIT).forEach(function (u) {
        body.appendChild(el("tr", null, [el("td", { cls: "id" }, [visibleSpan(u[0])]), el("td", { cls: "id" }, [visibleSpan(u[1])]), el("td", null, [textBlock([u[2]], 0)])]));
      });
      var read = Object.keys(CHUNKS).filter(function (n) { return CHUNKS[n] === "loaded"; }).length;
      count.textContent = (hits.length > LIMIT ? "showing the first " + LIMIT + " of " : "showing ") + hits.length.toLocaleString("en-US") + " of " + units.length.toLocaleString("en-US") +
        (files ? " (the texts of the queries read so far: this page and " + read + " of " + files + " data files)" : "");
      var failed = Object.keys(CHUNKS).filter(function (n) { return CHUNKS[n] !== "loaded" && CHUNKS[n] !== "loading"; });
      status.textContent = failed.map(function (n) { return CHUNKS[n]; }).join(" ");
    }
    if (!files) { load.remove(); }
    load.addEventListener("click", function () {
      load.disabled = true;
      var n = 0;
      function next() { n += 1; if (n <= files) { need(n, next); } }
      next();
    });
    LISTENERS.push(apply);
    search.addEventListener("input", apply);
    apply();
  }

  // --- compare.html -----------------------------------------------------------------------
  function startCompare() {
    var challenger = document.getElementById("c-challenger");
    var metric = document.getElementById("c-metric");
    DATA.systems.slice(1).forEach(function (label, i) { challenger.appendChild(el("option", { value: String(i + 1), text: label + " against " + DATA.systems[0] })); });
    DATA.metrics.forEach(function (name, i) {
      var option = el("option", { value: String(i), text: name });
      if (name === DATA.metric) { option.selected = true; }
      metric.appendChild(option);
    });
    function pair(q) {
      var c = Number(challenger.value), m = Number(metric.value);
      var a = q.systems[0], b = q.systems[c];
      var x = a ? a.m[m] : null, y = b ? b.m[m] : null;
      var d = x === null || y === null || x === undefined || y === undefined ? null : y - x;
      return { ref: x, ch: y, d: d, outcome: d === null ? "na" : d > 0 ? "win" : d < 0 ? "loss" : "tie" };
    }
    var columns = [
      { key: "id", label: "query", cell: function (q) { return q.id; }, value: function (q) { return q.id; } },
      { key: "cat", label: "category", cell: function (q) { return LABELS[q.cat] || q.cat; }, value: function (q) { return DATA.categories.map(function (c) { return c[0]; }).indexOf(q.cat); } },
      { key: "ref", label: "reference", num: true, cell: function (q) { return fmt(pair(q).ref); }, value: function (q) { return pair(q).ref; } },
      { key: "ch", label: "challenger", num: true, cell: function (q) { return fmt(pair(q).ch); }, value: function (q) { return pair(q).ch; } },
      { key: "d", label: "difference", num: true, cell: function (q) { return signed(pair(q).d); }, value: function (q) { return pair(q).d; } },
      { key: "outcome", label: "outcome", cell: function (q) { var o = pair(q).outcome; return el("span", { cls: o, text: o === "na" ? "n/a" : o }); }, value: function (q) { return pair(q).outcome; } }
    ];
    function detail(q) {
      return withRecord(q, function (box, rec) { drawDetail(box, q, rec); });
    }
    function drawDetail(box, q, rec) {
      questionBlock(box, q, rec);
      box.appendChild(el("h3", { text: "Expected (" + rec.expected.length + "; " + q.rel + " relevant, grade 2 or 3)" }));
      if (rec.expected.length) {
        box.appendChild(simpleTable(["id", "grade", "text"], rec.expected.map(function (e) {
          return gradeRow([visibleSpan(e[0], "id"), { node: document.createTextNode(String(e[1])), cls: "num" }, textBlock(rec.texts, e[2])], e[1]);
        })));
      } else {
        box.appendChild(el("p", { cls: "muted", text: "Nothing is graded for this query." }));
      }
      box.appendChild(el("h3", { text: "Each system's top-" + DATA.k }));
      var side = el("div", { cls: "side" });
      DATA.systems.forEach(function (label, i) {
        var s = q.systems[i], top = rec.systems[i];
        var col = el("div", { "data-system": label });
        col.appendChild(el("h3", null, [visibleSpan(label)]));
        if (!s || !top) { col.appendChild(el("p", { cls: "muted", text: "not in this system's result" })); side.appendChild(col); return; }
        col.appendChild(el("p", { cls: "meta", text: DATA.metrics.map(function (name, j) { return name + " " + fmt(s.m[j]); }).join(", ") }));
        col.appendChild(simpleTable(["rank", "id", "grade", "score", "text"], returnedRows(top.returned, rec.texts)));
        col.appendChild(whyBlock(top.why));
        side.appendChild(col);
      });
      box.appendChild(side);
    }
    var table = new QueryTable(document.getElementById("q-table"), columns, detail, document.getElementById("q-count"), DATA.queries.length);
    var cat = document.getElementById("f-cat"), out = document.getElementById("f-outcome"), search = document.getElementById("f-search");
    function apply() {
      var needle = lower(search.value.trim());
      var head = table.table.tHead.rows[0].cells;
      head[2].textContent = DATA.systems[0];
      head[3].textContent = DATA.systems[Number(challenger.value)];
      table.draw(DATA.queries.filter(function (q) {
        return (!cat.value || q.cat === cat.value) && (!out.value || pair(q).outcome === out.value) && matches(q, needle);
      }));
    }
    [challenger, metric, cat, out].forEach(function (n) { n.addEventListener("change", apply); });
    search.addEventListener("input", apply);
    apply();
  }

  if (DATA.kind === "compare") { startCompare(); } else { startReport(); }
}());
