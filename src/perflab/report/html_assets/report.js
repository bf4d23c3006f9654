// perflab report: builds every table and chart from the embedded JSON.
// User strings (tags, comments, commands, metric names, environment values) are set
// with textContent, never as markup; in Plotly (whose labels accept a few tags) they go
// through plotlyText, which turns <, > and & into entities that Plotly shows as text.
"use strict";
(function () {
  performance.mark("perflab-script-start");
  const DATA = JSON.parse(document.getElementById("perflab-data").textContent);
  const RUNS = DATA.runs || {};
  const METRICS = DATA.metrics || [];
  const SAMPLES = DATA.samples || {};
  const COLORS = { regression: "#c62828", improvement: "#2e7d32", change: "#8a5a00" };
  const PLOT_CONFIG = { displaylogo: false, responsive: true, modeBarButtonsToRemove: ["sendDataToCloud"] };

  function el(tag, attrs, text) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "class") node.className = v; else node.setAttribute(k, v);
    }
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }
  function plotlyText(s) {
    return String(s === null || s === undefined ? "-" : s)
      .replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  }
  function show(id) { const s = document.getElementById(id); s.hidden = false; return s; }
  function num(x, digits) {
    if (x === null || x === undefined || !isFinite(x)) return "-";
    const a = Math.abs(x);
    if (a !== 0 && (a >= 1e7 || a < 1e-3)) return x.toExponential(2);
    return x.toLocaleString("en-US", { maximumSignificantDigits: digits || 4 });
  }
  function pct(x, signed) {
    if (x === null || x === undefined || !isFinite(x)) return "-";
    const v = (x * 100).toFixed(Math.abs(x) < 0.1 ? 2 : 1) + "%";
    return signed === false || x < 0 ? v : "+" + v;
  }
  function pval(p) { return p === null || p === undefined ? "-" : (p < 0.001 ? p.toExponential(1) : p.toFixed(3)); }
  function short(commit) { return commit ? commit.slice(0, 12) : "-"; }
  function tocLink(id, text) {
    const a = el("a", { href: "#" + id }, text);
    document.getElementById("toc").appendChild(a);
  }

  // ---- header, notes --------------------------------------------------------
  document.getElementById("subtitle").textContent =
    "generated " + DATA.generated + " by perflab " + DATA.version + (DATA.filters ? " — " + DATA.filters : "") +
    " — " + Object.keys(RUNS).length + " runs, " + DATA.sample_count + " samples";
  // The verdict first: the comparison's counts, or what the trends found.
  function trendHeadline(list) {
    const changes = list.reduce((n, t) => n + t.changes.length, 0);
    const kinds = {};
    for (const t of list) for (const c of t.changes) kinds[c.kind] = (kinds[c.kind] || 0) + 1;
    const named = Object.entries(kinds).map(([k, n]) => n + " " + k + (n === 1 ? "" : "s")).join(", ");
    return changes + " change point" + (changes === 1 ? "" : "s") + (named ? " (" + named + ")" : "") + " in " +
      list.length + " series";
  }
  document.getElementById("headline").textContent = DATA.comparison ? DATA.comparison.headline :
    trendHeadline(DATA.trends || []);
  if (DATA.notes && DATA.notes.length) {
    const s = show("notes");
    for (const n of DATA.notes) s.appendChild(el("p", { class: "note" }, n));
  }
  document.getElementById("footer").textContent =
    "Self-contained: every script, style and number is in this file (" + (DATA.plotly || "plotly.js") + " included).";

  // ---- sortable tables --------------------------------------------------------
  function makeTable(table, columns, rows) {
    // columns: [{title, cls, value(row) -> sort key, text(row) -> shown}], rows: data objects
    const thead = el("thead"), tr = el("tr");
    columns.forEach((c, i) => {
      const th = el("th", { class: (c.cls || "") + (c.fold ? " fold" : ""), title: c.help || "" }, c.title);
      th.addEventListener("click", () => sortBy(table, i, columns));
      tr.appendChild(th);
    });
    thead.appendChild(tr);
    const tbody = el("tbody");
    for (const r of rows) {
      const row = el("tr", r._attrs || {});
      row._data = r;
      for (const c of columns) {
        // cellClass, cellTitle: per cell (a side-by-side cell is coloured by its own verdict).
        const attrs = { class: (c.cls || "") + (c.fold ? " fold" : "") + (c.cellClass ? " " + c.cellClass(r) : "") };
        if (c.cellTitle) attrs.title = c.cellTitle(r);
        row.appendChild(el("td", attrs, c.text(r)));
      }
      tbody.appendChild(row);
    }
    table.replaceChildren(thead, tbody);
  }
  function sortBy(table, i, columns) {
    const th = table.tHead.rows[0].cells[i];
    const desc = th.classList.contains("sorted-asc");
    for (const c of table.tHead.rows[0].cells) c.classList.remove("sorted-asc", "sorted-desc");
    th.classList.add(desc ? "sorted-desc" : "sorted-asc");
    const key = columns[i].value || columns[i].text;
    const body = table.tBodies[0];
    const rows = Array.from(body.rows);
    rows.sort((a, b) => {
      let x = key(a._data), y = key(b._data);
      const nx = x === null || x === undefined || (typeof x === "number" && !isFinite(x));
      const ny = y === null || y === undefined || (typeof y === "number" && !isFinite(y));
      if (nx || ny) return nx === ny ? 0 : (nx ? 1 : -1);   // missing figures last either way
      if (typeof x === "string") { x = x.toLowerCase(); y = String(y).toLowerCase(); }
      return (x < y ? -1 : x > y ? 1 : 0) * (desc ? -1 : 1);
    });
    body.append(...rows);
  }

  // ---- comparison ---------------------------------------------------------------
  const VERDICT_CLASS = { "regression": "regression", "improvement": "improvement", "changed": "changed",
                          "insufficient samples": "insufficient" };
  function comparison(cmp) {
    show("comparison");
    tocLink("comparison", "Comparison");
    const head = document.getElementById("comparison-head");
    head.appendChild(el("p", {}, "base " + cmp.labels[0] + " (runs " + (cmp.runs[cmp.labels[0]] || []).join(", ") + ")" +
      cmp.labels.slice(1).map(l => "; head " + l + " (runs " + (cmp.runs[l] || []).join(", ") + ")").join("")));
    head.appendChild(el("p", { class: "note" },
      "A difference is called when significant after controlling the false-discovery rate at " + cmp.alpha +
      " within its family and larger than " + pct(cmp.threshold, false) +
      "; 'detectable' is the smallest change these samples would find with 90% power."));
    cmp.families.forEach((fams, i) => {
      const text = fams.map(f => f.name + ": " + f.tested + " tested" + (f.informational ? ", " + f.informational + " informational" : "") +
        (f.untested ? ", " + f.untested + " too few samples" : "")).join("; ");
      const geo = Object.entries(cmp.geomeans[i] || {}).map(([u, g]) => "geomean of median ratios (" + (u || "no unit") + ") " + num(g)).join("; ");
      head.appendChild(el("p", { class: "note" }, cmp.labels[i + 1] + " vs " + cmp.labels[0] + " — FDR families: " + text + (geo ? "; " + geo : "")));
    });
    // The sides measured different things (a file system, host against guest): said before any figure.
    for (const d of cmp.measured_differently || []) head.insertBefore(el("p", { class: "warn" }, "measured differently: " + d), head.firstChild);
    for (const w of cmp.warnings) head.appendChild(el("p", { class: "warn" }, "warning: " + w));
    if (cmp.grid) sideBySide(cmp);
    // Beside the grid, what a head did not measure is said once there, not as a row per metric.
    const rows = cmp.rows.filter(r => (r.monitor === null || r.monitor === undefined) &&
                                      !(cmp.grid && r.verdict === "absent from head"));
    for (const r of rows) {
      r._attrs = { class: VERDICT_CLASS[r.verdict] || "", "data-verdict": r.verdict, "data-metric": r.metric };
    }
    // LKP's order first (base, its spread, %change, head, its spread, verdict), the rest after.
    const single = cmp.labels.length === 2;
    const cols = [
      { title: "testcase", cls: "name", text: r => r.testcase },
      { title: "metric", cls: "text", text: r => r.metric },
      { title: "unit", cls: "text", fold: true, text: r => r.unit },
      { title: cmp.labels[0], help: "the base's figure (stats.descriptive): harmonic mean for higher-is-better rates, else mean; an exact metric's least disturbed sample",
        value: r => r.base_stats && r.base_stats.center, text: r => num(r.base_stats && r.base_stats.center) },
      { title: "±", help: "coefficient of variation of the base", value: r => r.base_stats && r.base_stats.cov, text: r => pct(r.base_stats && r.base_stats.cov, false) },
      { title: "%change", value: r => r.pct_change, text: r => pct(r.pct_change) },
      { title: single ? cmp.labels[1] : "head value", value: r => r.head_stats && r.head_stats.center, text: r => num(r.head_stats && r.head_stats.center) },
      { title: "± ", help: "coefficient of variation of the head", value: r => r.head_stats && r.head_stats.cov, text: r => pct(r.head_stats && r.head_stats.cov, false) },
      { title: "verdict", cls: "text verdict", text: r => r.verdict },
      { title: "interval", help: "confidence interval of the %change at the FDR-adjusted level after @ (see the legend below)", value: r => r.ci_low,
        text: r => r.ci_low === null && r.ci_high === null ? "-" : "[" + pct(r.ci_low) + ", " + pct(r.ci_high) + "]" + (r.ci_level ? " @" + (r.ci_level * 100).toFixed(1) + "%" : "") },
      { title: "p adj.", help: "p-value adjusted over the metric's FDR family (Benjamini-Hochberg)", value: r => r.p_adjusted, text: r => pval(r.p_adjusted) },
      { title: "samples", help: "samples (stored values) of the base and of the head", value: r => r.base_stats && r.base_stats.n,
        text: r => (r.base_stats ? r.base_stats.n : "-") + " / " + (r.head_stats ? r.head_stats.n : "-") },
      { title: "p", fold: true, help: "one-sided p-value in the direction of the change", value: r => r.p_value, text: r => pval(r.p_value) },
      { title: "detectable", fold: true, help: "smallest change these samples detect with 90% power", value: r => r.detectable, text: r => pct(r.detectable, false) },
      { title: "median Δ", fold: true, help: "change of the medians", value: r => r.median_change, text: r => pct(r.median_change) },
      { title: "family", cls: "text", fold: true, help: "FDR family (its size)", text: r => r.family + (r.family_size ? " (" + r.family_size + ")" : "") },
      { title: "warnings", cls: "wrap", fold: true, text: r => (r.warnings || []).join("; ") },
    ];
    if (!single) cols.splice(3, 0, { title: "head", cls: "text", text: r => r.head });
    const table = document.getElementById("comparison-table");
    makeTable(table, cols, rows);
    const unfold = document.getElementById("all-columns");
    unfold.addEventListener("change", () => table.classList.toggle("unfolded", unfold.checked));
    document.getElementById("comparison-legend").textContent =
      "Values are each side's figure, as show, compare and the mail print it: the harmonic mean of the samples for " +
      "higher-is-better rates, else the mean; an exact metric's (a count, icount time) its least disturbed sample; " +
      "± is their coefficient of variation. interval: the confidence interval of the %change; the figure after @ is " +
      "its confidence level, raised above " + pct(1 - cmp.alpha, false) + " by the false-discovery-rate adjustment over " +
      "the metrics tested together (Benjamini-Hochberg), so \"[-3.0%, -1.0%] @96.7%\" is a 96.7% interval. " +
      "p adj.: the p-value adjusted the same way. \"all columns\" shows the p-value, the detectable change, " +
      "the medians' change, the FDR family and the warnings.";
    const select = document.getElementById("filter-verdict");
    for (const v of [...new Set(rows.map(r => r.verdict))].sort()) select.appendChild(el("option", { value: v }, v));
    const input = document.getElementById("filter-metric");
    const count = document.getElementById("filter-count");
    function filter() {
      const text = input.value.trim().toLowerCase(), verdict = select.value;
      let shown = 0;
      for (const tr of table.tBodies[0].rows) {
        const r = tr._data;
        const ok = (!text || r.metric.toLowerCase().includes(text) || r.testcase.toLowerCase().includes(text)) &&
          (!verdict || r.verdict === verdict);
        tr.hidden = !ok;
        shown += ok;
      }
      count.textContent = shown + " of " + rows.length + " rows";
    }
    input.addEventListener("input", filter);
    select.addEventListener("change", filter);
    filter();
    const foot = document.getElementById("comparison-foot");
    if (cmp.only_in.length) {
      foot.appendChild(el("p", { class: "note" }, "Measured on one side only:"));
      const ul = el("ul");
      for (const [label, what] of cmp.only_in) ul.appendChild(el("li", {}, label + ": " + what));
      foot.appendChild(ul);
    }
    if (cmp.monitor_only_in) foot.appendChild(el("p", { class: "note" }, cmp.monitor_only_in + " monitor metric(s) measured on one side only"));
    monitors(cmp);
  }

  // Several heads: one row per metric, one column per variant (mmtests' habit), each head's cell
  // its centre and %change against the base, coloured by the comparison's verdict.
  function sideBySide(cmp) {
    const g = cmp.grid;
    show("comparison-side");
    const cols = [
      { title: "testcase", cls: "name", text: r => r.testcase },
      { title: "metric", cls: "text", text: r => r.metric },
      { title: g.columns[0], help: cmp.labels[0] + " (base): its centre", value: r => r.base,
        text: r => num(r.base, 7), cellTitle: r => "CoV " + pct(r.base_cov, false) },
    ];
    g.columns.slice(1).forEach((name, i) => cols.push({
      title: name, help: cmp.labels[i + 1] + ": its centre (%change against " + cmp.labels[0] + ")",
      value: r => r.cells[i] ? r.cells[i].pct : null,
      text: r => r.cells[i] ? num(r.cells[i].center, 7) + " (" + pct(r.cells[i].pct) + ")" : "-",
      cellClass: r => r.cells[i] ? (VERDICT_CLASS[r.cells[i].verdict] || "") : "absent",
      cellTitle: r => r.cells[i] ? r.cells[i].verdict + (r.cells[i].ci ? " [" + pct(r.cells[i].ci[0]) + ", " +
        pct(r.cells[i].ci[1]) + "]" : "") + (r.cells[i].exact ? " (exact)" : "") + "; CoV " + pct(r.cells[i].cov, false) :
        "not measured" }));
    cols.push({ title: "unit", cls: "text", text: r => r.unit });
    makeTable(document.getElementById("comparison-grid"), cols, g.rows);
    const absent = document.getElementById("comparison-absent");
    for (const line of g.absent) absent.appendChild(el("p", { class: "note" }, line));
  }

  function environmentDiff(cmp) {
    const body = document.getElementById("environment-body");
    show("environment");
    tocLink("environment", "Environment");
    const differing = cmp.env_diff.reduce((n, d) => n + d.diffs.length, 0);
    document.getElementById("environment-summary").textContent = differing + " recorded fact" +
      (differing === 1 ? " differs" : "s differ") + " between the base and the head" + (cmp.env_diff.length > 1 ? "s" : "") + " (show)";
    for (const d of cmp.env_diff) {
      body.appendChild(el("h3", {}, cmp.labels[0] + " (run #" + d.base_run + ") → " + d.head + " (run #" + d.head_run + ")"));
      if (!d.diffs.length) { body.appendChild(el("p", { class: "note" }, "no difference in the recorded environment")); continue; }
      const table = el("table", { class: "data env-diff" });
      makeTable(table, [{ title: "fact", cls: "text", text: r => r[0] }, { title: cmp.labels[0], cls: "wrap", text: r => r[1] },
                        { title: d.head, cls: "wrap", text: r => r[2] }], d.diffs);
      body.appendChild(table);
    }
    const common = Object.entries(cmp.common || {});
    if (common.length) {
      body.appendChild(el("h3", {}, "the same on every side"));
      const table = el("table", { class: "data" });
      makeTable(table, [{ title: "fact", cls: "text", text: r => r[0] }, { title: "value", cls: "wrap", text: r => r[1] }], common);
      body.appendChild(table);
    }
  }

  function monitors(cmp) {
    // compare's views: "changed" (significant, above the noise floor) or "all".
    const rows = cmp.monitors === "all" ? cmp.rows.filter(r => r.monitor && r.verdict !== "absent from head") :
      cmp.rows.filter(r => r.monitor && r.shown && (r.verdict === "changed" || r.verdict === "regression" ||
                                                    r.verdict === "improvement") && !r.noise);
    const body = document.getElementById("monitors-body");
    show("monitors");
    const c = cmp.monitor_counts || {};
    body.appendChild(el("p", { class: "note" }, (c.compared || 0) + " monitor metrics compared, " + (c.significant || 0) +
      " changed significantly, " + (c.noise || 0) + " of them below the noise floor; shown: " +
      (cmp.monitors === "all" ? "every one (--monitors all)" : "the changed ones above it, beside the verdict of the benchmark's own metrics") + "." +
      (cmp.monitor_windows ? " " + cmp.monitor_windows[0].toUpperCase() + cmp.monitor_windows.slice(1) + "." : "")));
    if (!rows.length) return;
    tocLink("monitors", "Monitors");
    for (const r of rows) r._attrs = { class: VERDICT_CLASS[r.verdict] || "" };
    const table = el("table", { class: "data" });
    makeTable(table, [
      { title: "monitor", cls: "text", text: r => r.monitor }, { title: "metric", cls: "text", text: r => r.metric },
      { title: "head", cls: "text", text: r => r.head },
      { title: "base", value: r => r.base_stats && r.base_stats.center, text: r => num(r.base_stats && r.base_stats.center) },
      { title: "%change", value: r => r.pct_change, text: r => pct(r.pct_change) },
      { title: "head value", value: r => r.head_stats && r.head_stats.center, text: r => num(r.head_stats && r.head_stats.center) },
      { title: "p adj.", value: r => r.p_adjusted, text: r => pval(r.p_adjusted) },
      { title: "verdict", cls: "text verdict", text: r => r.verdict }], rows);
    body.appendChild(table);
    const series = cmp.monitor_series || [];
    if (!series.length) return;
    body.appendChild(el("p", { class: "hint" }, "Their time series during the timed part: a line per run and repetition, " +
      "the base in blue, the heads in other colours (counters as rates per second over each interval)."));
    const charts = el("div", { class: "charts" });
    body.appendChild(charts);
    const palette = ["#4a78c2", "#f28e2b", "#59a14f", "#e15759", "#b07aa1", "#76b7b2"];
    series.forEach((m, i) => chartBox(charts, m.metric + (m.unit ? " (" + m.unit + ")" : ""), "monitor-series", "monitor-" + i, plot => {
      const traces = [];
      m.sides.forEach((side, k) => side.lines.forEach((line, j) => traces.push({
        x: line.t, y: line.v, type: "scatter", mode: line.t.length > 1 ? "lines" : "markers",
        name: plotlyText(side.label), legendgroup: "side" + k, showlegend: j === 0,
        line: { color: palette[k % palette.length], width: 1 }, marker: { color: palette[k % palette.length] },
        text: line.t.map(() => plotlyText(side.label) + " run #" + line.run + " repetition " + line.repetition),
        hoverinfo: "text+x+y" })));
      Plotly.newPlot(plot, traces, { margin: { l: 60, r: 20, t: 20, b: 50 }, height: 300, hovermode: "closest",
        xaxis: { title: { text: "seconds into the timed part" } }, yaxis: { title: { text: plotlyText(m.unit || "") } } }, PLOT_CONFIG);
    }));
  }

  // ---- charts -----------------------------------------------------------------------
  // A chart is drawn when it comes near the viewport (IntersectionObserver), one chart per
  // task so that the page opens and scrolls while charts come in: a page of a hundred charts
  // opens as fast as one of a few. drawAll() draws the rest at once.
  const pending = new Map();
  const queue = [];
  let scheduled = false;
  const observer = "IntersectionObserver" in window ? new IntersectionObserver(entries => {
    for (const e of entries) if (e.isIntersecting && pending.has(e.target) && !queue.includes(e.target)) queue.push(e.target);
    schedule();
  }, { rootMargin: "200px 0px" }) : null;
  function schedule() {
    if (scheduled || !queue.length) return;
    scheduled = true;
    setTimeout(() => {
      scheduled = false;
      const plot = queue.shift();
      if (plot) draw(plot);
      if (!queue.length && !pending.size) performance.mark("perflab-all-drawn");
      if (!queue.length) performance.mark("perflab-queue-empty");
      schedule();
    }, 0);
  }
  function draw(plot) {
    const fn = pending.get(plot);
    if (!fn) return;
    pending.delete(plot);
    if (observer) observer.unobserve(plot);
    const t0 = performance.now();
    fn();
    performance.measure("perflab-chart " + plot.id, { start: t0, end: performance.now() });
  }
  function drawAll() { for (const plot of Array.from(pending.keys())) draw(plot); }
  function chartBox(parent, title, cls, id, drawFn) {
    const box = el("div", { class: "chart " + (cls || "") });
    box.appendChild(el("div", { class: "chart-title" }, title));
    const plot = el("div", { class: "plot", id: id });
    box.appendChild(plot);
    parent.appendChild(box);
    pending.set(plot, () => drawFn(plot));
    if (observer) observer.observe(plot); else draw(plot);
    return plot;
  }
  function seriesTitle(t) {
    return t.testbox + " " + (t.name || t.benchmark) + " " + t.metric + (t.unit ? " (" + t.unit + ")" : "");
  }
  // k/M on an axis of large figures; small ones as they are ("~s" would print 60m for 0.06).
  function yFormat(values) {
    const top = Math.max(0, ...values.filter(v => v !== null && isFinite(v)).map(Math.abs));
    return top >= 1e4 ? "~s" : "";
  }
  function runHover(ids) {
    const r = RUNS[String(ids[0])] || {};
    let text = "run #" + ids.join(", #") + "<br>commit " + plotlyText(short(r.commit)) + (r.dirty ? "+dirty" : "") +
      "<br>tag " + plotlyText(r.tag || "-") + "<br>" + plotlyText(r.started || "");
    if (r.comment) text += "<br>comment: " + plotlyText(r.comment.length > 80 ? r.comment.slice(0, 80) + "…" : r.comment);
    return text;
  }

  function trends(list) {
    if (!list.length) return;
    show("trends");
    tocLink("trends", "Trends");
    const body = document.getElementById("trends-body");
    const single = [];
    list.forEach((t, i) => {
      if (t.runs.length < 2) { single.push(t); return; }   // a point is no line: listed below, not drawn
      chartBox(body, seriesTitle(t), "trend", "trend-" + i, plot => drawTrend(plot, t));
    });
    if (!single.length) return;
    const where = document.getElementById("trends-single");
    where.appendChild(el("p", { class: "hint" }, single.length + " series with a single point (not drawn):"));
    const ul = el("ul", { class: "single-points" });
    for (const t of single) ul.appendChild(el("li", {}, seriesTitle(t) + ": " + num(t.y[0]) + " (" +
      (t.labels && t.labels[0] ? "kernel " + t.labels[0] + ", " : "") + "run #" + t.runs[0].join(", #") + ")"));
    where.appendChild(ul);
  }
  // A point's label on the x axis: its kernel release (in kernel order), its commit (in commit order) or its run.
  function pointLabel(t, k) {
    if (t.labels && t.labels[k]) return t.labels[k];
    if (t.order === "commit") return short((RUNS[String(t.runs[k][0])] || {}).commit).slice(0, 8);
    return "#" + t.runs[k][0];
  }
  const AXIS_TITLES = { commit: "commit (first-parent order)", kernel: "kernel release (version order)" };
  // Where a change point's line goes: halfway between the last point of the old level and
  // the first of the new (dates as "YYYY-MM-DD HH:MM:SS" UTC, or commit positions).
  function between(a, b) {
    if (a === undefined || a === null) return b;
    if (typeof a === "number") return (a + b) / 2;
    const ta = Date.parse(a.replace(" ", "T") + "Z"), tb = Date.parse(b.replace(" ", "T") + "Z");
    if (!isFinite(ta) || !isFinite(tb)) return b;
    return new Date((ta + tb) / 2).toISOString().replace("T", " ").slice(0, 19);
  }
  function drawTrend(plot, t) {
    const n = t.runs.length;
    const xs = t.runs.map((_, k) => k);   // evenly spaced, labelled by commit or run
    const step = Math.max(1, Math.ceil(n / 12));
    const ticks = xs.filter(k => k % step === 0);
    const ys = t.y;
    const outliers = new Set(t.outliers);
    const hover = t.runs.map((ids, k) => (t.labels && t.labels[k] ? "kernel " + plotlyText(t.labels[k]) + "<br>" : "") + runHover(ids) + (t.subjects && t.subjects[k] ? "<br>" + plotlyText(t.subjects[k]) : "") +
      (outliers.has(k) ? "<br>(spike: set aside)" : ""));
    const levelX = [], levelY = [];
    for (const [start, stop, mean] of t.levels) {
      levelX.push(xs[start], xs[stop - 1], null);
      levelY.push(mean, mean, null);
    }
    const annotated = [];
    t.runs.forEach((ids, k) => { if (ids.some(id => (RUNS[String(id)] || {}).comment)) annotated.push(k); });
    const traces = [
      { x: xs, y: ys, type: "scatter", mode: n > 1 ? "lines+markers" : "markers", name: "runs",
        text: hover, hoverinfo: "text+y", customdata: t.runs, line: { width: 1, color: "#4a78c2" },
        marker: { size: n > 300 ? 4 : 7, color: t.runs.map((ids, k) => outliers.has(k) ? "#999" : "#4a78c2") } },
      { x: levelX, y: levelY, type: "scatter", mode: "lines", name: "levels", hoverinfo: "skip",
        line: { width: 2, color: "#f28e2b" } },
      { x: annotated.map(k => xs[k]), y: annotated.map(k => ys[k]), type: "scatter", mode: "markers", name: "annotated",
        text: annotated.map(k => hover[k]), hoverinfo: "text+y", customdata: annotated.map(k => t.runs[k]),
        marker: { symbol: "star", size: 14, color: "#e6b800", line: { width: 1, color: "#555" } } },
    ];
    const shapes = [], notes = [];
    for (const c of t.changes) {
      const x = between(xs[c.index - 1], xs[c.index]);
      shapes.push({ type: "line", xref: "x", yref: "paper", x0: x, x1: x, y0: 0, y1: 1,
                    line: { dash: "dash", width: 1.5, color: COLORS[c.kind] || "#333" } });
      notes.push({ x: x, y: 0.98, xref: "x", yref: "paper", yanchor: "top", xanchor: "left", showarrow: false,
                   bgcolor: "rgba(255,255,255,0.8)",
                   text: plotlyText(c.kind + " " + pct(c.change) + " (p " + pval(c.p) + ")"),
                   font: { size: 10, color: COLORS[c.kind] || "#333" } });
    }
    // Rotated labels (kernel releases) take the room they need, and the axis title sits below them
    // (automargin with a standoff), never across them.
    const layout = { margin: { l: 60, r: 20, t: 30, b: 50 }, height: 320, shapes: shapes, annotations: notes,
                     showlegend: false, hovermode: "closest",
                     xaxis: { title: { text: AXIS_TITLES[t.order] || "run (by start time)", standoff: 12 }, automargin: true,
                              tickvals: ticks, ticktext: ticks.map(k => plotlyText(pointLabel(t, k))), tickangle: ticks.length > 6 ? -30 : 0 },
                     yaxis: { title: { text: plotlyText((t.unit || "") + (t.figure ? ", " + t.figure + " per point" : "")) }, tickformat: yFormat(ys) } };
    Plotly.newPlot(plot, traces, layout, PLOT_CONFIG);
    plot.on("plotly_click", ev => {
      // A point is one run, or (in commit order) every run of one commit: the first is shown, the others listed.
      const ids = ev.points.length ? [].concat(ev.points[0].customdata || []) : [];
      if (ids.length) runDetail(ids[0], ids);
    });
  }

  function runDetail(id, pooled) {
    const r = RUNS[String(id)];
    if (!r) return;
    const section = show("run-detail");
    document.getElementById("run-detail-id").textContent = "#" + id;
    const body = document.getElementById("run-detail-body");
    body.replaceChildren();
    if (pooled && pooled.length > 1) {
      const p = el("p", { class: "pooled" }, "this point pools " + pooled.length + " runs: ");
      for (const other of pooled) {
        const b = el("button", { type: "button", class: other === id ? "pooled-run current" : "pooled-run" }, "#" + other);
        b.addEventListener("click", () => runDetail(other, pooled));
        p.appendChild(b);
      }
      body.appendChild(p);
    }
    const facts = [["benchmark", r.benchmark], ["name", r.name], ["status", r.status], ["testbox", r.testbox],
                   ["started", r.started], ["tag", r.tag || "-"], ["commit", (r.commit || "-") + (r.dirty ? " (dirty)" : "")],
                   ["comment", r.comment || "-"], ...Object.entries(r.params).map(([k, v]) => ["param " + k, v])];
    const t1 = el("table", { class: "data run-facts" });
    makeTable(t1, [{ title: "run", cls: "text", text: x => x[0] }, { title: "", cls: "wrap", text: x => x[1] }], facts);
    body.appendChild(t1);
    const by = new Map();
    for (const [m, ...values] of SAMPLES[String(id)] || []) by.set(m, (by.get(m) || []).concat(values));
    body.appendChild(el("h3", {}, "samples"));
    const t2 = el("table", { class: "data run-samples" });
    makeTable(t2, [{ title: "metric", cls: "text", text: x => METRICS[x[0]] }, { title: "n", text: x => x[1].length },
                   { title: "values (by repetition)", cls: "wrap", text: x => x[1].map(v => num(v, 6)).join("  ") }],
              Array.from(by.entries()));
    body.appendChild(t2);
    body.appendChild(el("h3", {}, "environment"));
    const t3 = el("table", { class: "data run-env" });
    makeTable(t3, [{ title: "fact", cls: "text", text: x => x[0] }, { title: "value", cls: "wrap", text: x => x[1] }],
              Object.entries(DATA.envs[r.env] || {}));
    body.appendChild(t3);
    section.scrollIntoView({ block: "nearest" });
  }

  function scaling(list) {
    if (!list.length) return;
    show("scaling");
    tocLink("scaling", "Scaling");
    const body = document.getElementById("scaling-body");
    list.forEach((s, i) => chartBox(body, s.testcase, "scaling-chart", "scaling-" + i, plot => {
      const traces = [];
      const variants = [...new Set(s.modes.map(m => m.variant || ""))];
      const palette = ["#4a78c2", "#f28e2b", "#59a14f", "#e15759", "#b07aa1", "#76b7b2"];
      for (const m of s.modes) {
        const k = variants.indexOf(m.variant || ""), color = palette[k % palette.length];
        const name = (variants.length > 1 ? m.variant + " " : "") + (m.mode === "process" ? "processes" : m.mode + "s");
        traces.push({ x: m.tasks, y: m.ops, type: "scatter", mode: "lines+markers", name: plotlyText(name),
                      line: { color: color, dash: m.mode === "process" ? "solid" : "dot" }, marker: { color: color },
                      error_y: { type: "data", array: (m.stddev || []).map(v => v === null ? 0 : v), visible: true, width: 3 },
                      text: m.efficiency.map(e => "efficiency " + pct(e, false)), hoverinfo: "x+y+text+name" });
        traces.push({ x: m.tasks, y: m.linear, type: "scatter", mode: "lines", name: plotlyText("linear (" + name + ")"),
                      line: { dash: "dash", width: 1, color: color } });
      }
      Plotly.newPlot(plot, traces, { margin: { l: 70, r: 20, t: 20, b: 50 }, height: 320,
        xaxis: { title: { text: "tasks" }, dtick: 1 },
        yaxis: { title: { text: "ops/s" }, rangemode: "tozero", tickformat: "~s" } }, PLOT_CONFIG);
    }));
  }

  function samplesOf(runIds, metric) {
    const out = [];
    for (const id of runIds) {
      for (const group of SAMPLES[String(id)] || []) if (group[0] === metric) for (let k = 1; k < group.length; k++) out.push(group[k]);
    }
    return out;
  }
  function distributions(list) {
    if (!list.length) return;
    show("distributions");
    tocLink("distributions", "Distributions");
    const body = document.getElementById("distributions-body");
    const cmp = DATA.comparison;
    list.forEach((d, i) => {
      let title, variants, unit;
      if (d.row !== undefined) {     // a comparison row: the base, then each head measured
        const heads = cmp.labels.length - 1, first = cmp.rows[d.row];
        unit = first.unit;
        title = first.testcase + " " + first.metric + (unit ? " (" + unit + ")" : "");
        variants = () => [{ label: cmp.labels[0], values: first.base_values }].concat(
          cmp.rows.slice(d.row, d.row + heads).filter(r => r.head_values).map(r => ({ label: r.head, values: r.head_values })));
      } else {
        unit = d.unit;
        title = d.testbox + " " + d.testcase + " " + METRICS[d.metric] + (unit ? " (" + unit + ")" : "") +
          (d.omitted_tags ? " — " + d.omitted_tags + " older tags not drawn" : "");
        variants = () => d.variants.map(v => ({ label: v.label, values: samplesOf(v.runs, d.metric) }));
      }
      chartBox(body, title, "distribution", "distribution-" + i, plot => {
        const traces = variants().map(v => ({ y: v.values, type: "box", name: plotlyText(v.label), boxpoints: "all",
                                             jitter: 0.4, pointpos: -1.7, marker: { size: 5, opacity: 0.75 }, boxmean: true }));
        Plotly.newPlot(plot, traces, { margin: { l: 60, r: 20, t: 20, b: 60 }, height: 320, showlegend: false,
                                       xaxis: { automargin: true },
                                       yaxis: { title: { text: plotlyText(unit || "") } } }, PLOT_CONFIG);
      });
    });
  }

  function textBlock(id, text, label) {
    if (!text) return;
    show(id);
    tocLink(id, label);
    document.getElementById(id + "-body").textContent = text;
  }

  if (DATA.comparison) comparison(DATA.comparison);
  trends(DATA.trends || []);
  if (DATA.comparison) environmentDiff(DATA.comparison);   // below the trends, folded
  scaling(DATA.scaling || []);
  distributions(DATA.distributions || []);
  textBlock("lmbench", DATA.lmbench, "LMbench");
  textBlock("kernbench", DATA.kernbench, "kernbench");
  performance.mark("perflab-script-end");
  window.perflabReport = { data: DATA, showRun: runDetail, drawAll: drawAll, pending: () => pending.size,
                          queued: () => queue.length + (scheduled ? 1 : 0) };
})();
