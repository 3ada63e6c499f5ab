// msgx status page. It reads GET /status (the msgx status report) and
// GET /status/history (the samples of the last minutes) every REFRESH_MS
// and redraws. Every text from the server goes into the page through
// textContent, never as markup: reasons and errors quote message content.
"use strict";

(function () {
  const REFRESH_MS = 5000;
  const SVGNS = "http://www.w3.org/2000/svg";
  const STATES = ["PENDING", "FAILED", "ROUTED", "SUCCEEDED", "SKIPPED", "DEAD", "ARCHIVED"];
  let busy = false;
  let lastOK = null;
  let refreshes = 0;

  // --- DOM helpers -------------------------------------------------------

  function el(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v !== undefined && v !== null) e.setAttribute(k, v);
    }
    for (const k of kids) e.append(k instanceof Node ? k : String(k));
    return e;
  }

  function svg(tag, attrs, content) {
    const e = document.createElementNS(SVGNS, tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    if (content !== undefined) e.textContent = content;
    return e;
  }

  function byId(id) { return document.getElementById(id); }

  function setText(id, s, cls) {
    const e = byId(id);
    e.textContent = s;
    e.className = cls || "";
  }

  function fillRows(tableId, rows) {
    byId(tableId).querySelector("tbody").replaceChildren(...rows);
  }

  // --- formatting --------------------------------------------------------

  function known(n) { return typeof n === "number" && n >= 0; }
  function count(n) { return known(n) ? String(n) : "?"; }

  function fmtAge(sec) {
    if (!known(sec)) return "?";
    sec = Math.floor(sec);
    const d = Math.floor(sec / 86400), h = Math.floor(sec % 86400 / 3600), m = Math.floor(sec % 3600 / 60), s = sec % 60;
    if (d > 0) return d + "d" + (h ? h + "h" : "");
    if (h > 0) return h + "h" + (m ? m + "m" : "");
    if (m > 0) return m + "m" + (s ? s + "s" : "");
    return s + "s";
  }

  function pad(n) { return String(n).padStart(2, "0"); }

  // Times are shown in the browser's zone, each with its offset: every
  // time shown names its zone (the inbox's own zone is named apart).
  function stamp(iso) {
    if (!iso) return "?";
    const t = new Date(iso);
    if (isNaN(t)) return String(iso);
    return t.getFullYear() + "-" + pad(t.getMonth() + 1) + "-" + pad(t.getDate()) + " " + clockTime(t);
  }

  function clockTime(t) { return pad(t.getHours()) + ":" + pad(t.getMinutes()) + ":" + pad(t.getSeconds()) + " " + zoneLabel(t); }

  // zoneLabel is the browser zone's offset at t: "UTC", "UTC+08:00".
  function zoneLabel(t) {
    const off = -t.getTimezoneOffset();
    if (off === 0) return "UTC";
    const a = Math.abs(off);
    return "UTC" + (off < 0 ? "-" : "+") + pad(Math.floor(a / 60)) + ":" + pad(a % 60);
  }

  function idRange(from, to) { return to > from ? from + "-" + to : String(from); }

  function fmtNum(v) {
    if (v === null || v === undefined) return "–";
    if (v === 0) return "0";
    return v < 10 ? v.toFixed(2) : v < 100 ? v.toFixed(1) : Math.round(v).toString();
  }

  function fmtCounts(m) {
    if (!m) return "?";
    const keys = Object.keys(m).sort();
    return keys.length ? keys.map(k => k + " " + m[k]).join(", ") : "none";
  }

  // --- charts ------------------------------------------------------------

  function niceMax(v) {
    if (!(v > 0)) return 1;
    const p = Math.pow(10, Math.floor(Math.log10(v)));
    for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= v) return m * p;
    return 10 * p;
  }

  // draw renders series ({name, values[]}, values aligned with times) as
  // lines over the window ending at end; a null value is a gap.
  function draw(id, times, series, windowSec, end, unit) {
    const fig = byId(id);
    const s = fig.querySelector("svg");
    const W = 420, H = 150, L = 40, R = 6, T = 8, B = 18;
    s.setAttribute("viewBox", "0 0 " + W + " " + H);
    const w = W - L - R, h = H - T - B;
    let top = 0;
    for (const se of series) for (const v of se.values) if (v !== null && v > top) top = v;
    top = niceMax(top);
    const x = t => L + Math.max(0, (t - (end - windowSec * 1000)) / (windowSec * 1000)) * w;
    const y = v => T + h - (v / top) * h;
    const kids = [];
    for (const f of [0, 0.5, 1]) {
      kids.push(svg("line", {x1: L, x2: W - R, y1: y(top * f), y2: y(top * f), class: "axis"}));
      kids.push(svg("text", {x: L - 4, y: y(top * f) + 3, "text-anchor": "end"}, fmtNum(top * f)));
    }
    for (let i = 0; i <= 3; i++) {
      const ago = windowSec * (3 - i) / 3;
      kids.push(svg("text", {x: L + w * i / 3, y: H - 5, "text-anchor": i === 0 ? "start" : i === 3 ? "end" : "middle"},
        ago === 0 ? "now" : "-" + fmtAge(ago)));
    }
    const legend = [];
    series.forEach((se, i) => {
      const cls = "s" + (i % 6);
      let run = [];
      const flush = () => {
        if (run.length === 1) {
          kids.push(svg("circle", {cx: run[0][0], cy: run[0][1], r: 1.8, class: cls, "data-series": se.name}));
        } else if (run.length > 1) {
          kids.push(svg("polyline", {points: run.map(p => p[0].toFixed(1) + "," + p[1].toFixed(1)).join(" "),
            class: cls, "data-series": se.name, "data-points": run.length}));
        }
        run = [];
      };
      se.values.forEach((v, j) => {
        if (v === null || v === undefined) { flush(); return; }
        run.push([x(times[j]), y(v)]);
      });
      flush();
      let last = null;
      for (let j = se.values.length - 1; j >= 0; j--) if (se.values[j] !== null && se.values[j] !== undefined) { last = se.values[j]; break; }
      legend.push(el("span", {"data-series": se.name}, el("span", {class: "key " + cls}), se.name + " " + fmtNum(last) + (last === null ? "" : unit || "")));
    });
    if (!times.length) kids.push(svg("text", {x: L + w / 2, y: T + h / 2, "text-anchor": "middle", class: "empty"}, "no samples yet"));
    s.replaceChildren(...kids);
    fig.querySelector(".legend").replaceChildren(...legend);
  }

  function drawHistory(hist) {
    const samples = hist.samples || [];
    const times = samples.map(s => Date.parse(s.at));
    const end = times.length ? times[times.length - 1] : Date.now();
    const groups = [...new Set(samples.flatMap(s => Object.keys(s.groupLag || {})))].sort();
    const ms = v => (v === null || v === undefined) ? null : v * 1000;
    draw("chart-lag", times, [
      {name: "inbox", values: samples.map(s => s.inboxLag)},
      ...groups.map(g => ({name: g, values: samples.map(s => (s.groupLag && g in s.groupLag) ? s.groupLag[g] : null)})),
    ], hist.windowSeconds, end);
    draw("chart-rate", times, [
      {name: "decisions/s", values: samples.map(s => s.decisionsPerSecond)},
      {name: "events/s", values: samples.map(s => s.eventsPerSecond)},
    ], hist.windowSeconds, end);
    draw("chart-latency", times, [
      {name: "end-to-end p50", values: samples.map(s => s.endToEnd ? ms(s.endToEnd.p50Seconds) : null)},
      {name: "end-to-end p99", values: samples.map(s => s.endToEnd ? ms(s.endToEnd.p99Seconds) : null)},
      {name: "decision p99", values: samples.map(s => s.decision ? ms(s.decision.p99Seconds) : null)},
    ], hist.windowSeconds, end, " ms");

    const last = samples[samples.length - 1];
    setText("decisions-rate", last ? fmtNum(last.decisionsPerSecond) : "–");
    setText("events-rate", last ? fmtNum(last.eventsPerSecond) : "–");
    let lat = "–";
    for (let j = samples.length - 1; j >= 0; j--) {
      const e = samples[j].endToEnd;
      if (e) {
        lat = fmtNum(e.p50Seconds * 1000) + " / " + fmtNum(e.p99Seconds * 1000) + " ms (" + e.count + " at " + clockTime(new Date(times[j])) + ")";
        break;
      }
    }
    setText("e2e-latency", lat);
    let note = samples.length + " samples, one every " + hist.intervalSeconds + " s over the last " + fmtAge(hist.windowSeconds) +
      " (kept in memory since this msgx started).";
    if (last && last.errors && last.errors.length) note += " Last sample incomplete: " + last.errors.join("; ");
    setText("history-note", note, "muted");
  }

  // --- the report --------------------------------------------------------

  function renderAlerts(rep) {
    const ul = byId("alerts");
    const alerts = rep.alerts || [];
    ul.replaceChildren(...(alerts.length ? alerts.map(a => el("li", {}, a))
      : [el("li", {class: "none"}, "none — keeping up, nothing stuck")]));
  }

  function renderInbox(rep) {
    const inb = rep.inbox;
    setText("inbox-lag", count(inb.lag));
    setText("watermark", count(inb.watermark) + " / " + count(inb.maxId));
    if (inb.maxIdError) setText("next-unread", "? (" + inb.maxIdError + ")", "bad");
    else if (inb.oldestUnread) {
      const u = inb.oldestUnread;
      setText("next-unread", "#" + u.msgId + " received " + (u.ageSeconds >= 0 ? fmtAge(u.ageSeconds) + " ago" : "at an unknown time"));
    } else setText("next-unread", "none (caught up)", "ok");

    if (inb.hole) {
      const hl = inb.hole;
      setText("hole", "IDs " + idRange(hl.from, hl.to) + " open for " + fmtAge(hl.ageSeconds) + " (since " + stamp(hl.since) +
        "): ingest holds every row after W=" + inb.watermark, "warn");
    } else if (inb.errors && inb.errors.length) setText("hole", "? (" + inb.errors[0] + ")", "bad");
    else setText("hole", "none", "ok");

    const late = known(inb.lateRows) && inb.lateRows > 0
      ? inb.lateRows + " (IDs " + (inb.lateRowIds || []).join(", ") + (inb.lateRows > (inb.lateRowIds || []).length ? ", …" : "") + ")"
      : count(inb.lateRows);
    setText("late-rows", late, inb.lateRows > 0 ? "bad" : "");
    let holes = count(inb.permanentHoles) + " (" + count(inb.permanentHoleIds) + " IDs)";
    const rh = inb.recentHoles || [];
    if (rh.length) holes += "; last " + idRange(rh[0].from, rh[0].to) + " released " + stamp(rh[0].releasedAt) + " (" + rh[0].reason + ")";
    setText("permanent-holes", holes);
    setText("inbox-zone", inb.zone || "? (MySQL not reached yet)", inb.zone ? "" : "bad");
    setText("zone-note", "Times on this page are in this browser's zone (" + zoneLabel(new Date()) + "); msgx trace and msgx status print UTC.", "muted");
  }

  // What to do with DEAD messages of a class msgx replay cannot move
  // (docs/operations.md#msgxdeadmessages).
  const NOT_REPLAYABLE = {
    MALFORMED: "not replayable: the message itself is wrong. Tell the sender; a corrected message is a new inbox row. Otherwise accept it (operations manual, MsgxDeadMessages).",
    PROTOCOL: "not replayable: the package breaks the protocol. Agree the fix with the AODB and ask for a fresh download (msgx request flights | refdata), or accept it (operations manual, MsgxDeadMessages).",
  };

  function replayCell(c, replayable) {
    if (!replayable) {
      return el("td", {class: "not-replayable"}, NOT_REPLAYABLE[c] || "not replayable by class; trace a message (msgx trace <MSG_ID>) to see why it died.");
    }
    const q = encodeURIComponent(c);
    return el("td", {}, el("a", {href: "/replay/dry-run?class=" + q, target: "_blank", rel: "noopener"}, "dry run"),
      " ", el("code", {}, "msgx replay --class " + c + " --dry-run"));
  }

  function renderMessages(rep) {
    const m = rep.messages;
    setText("backlog", count(m.backlog));
    const h = m.oldestUnfinished;
    if (h) {
      let s = "#" + h.msgId + " " + h.state + (h.errorClass ? " " + h.errorClass : "") + ", " + h.attempts + " attempts, enqueued " +
        fmtAge(h.ageSeconds) + " ago";
      if (h.nextAttemptAt) {
        const inSec = (Date.parse(h.nextAttemptAt) - Date.parse(rep.generatedAt)) / 1000;
        s += ", next attempt " + stamp(h.nextAttemptAt) + (inSec >= 0 ? " (in " + fmtAge(inSec) + ")" : " (due)");
      }
      if (h.lastError) s += ": " + h.lastError;
      setText("oldest-unfinished", s, h.state === "FAILED" ? "bad" : "warn");
    } else if (m.errors && m.errors.length) setText("oldest-unfinished", "? (" + m.errors[0] + ")", "bad");
    else setText("oldest-unfinished", "none", "ok");

    setText("dead-recent", known(m.deadRecent) ? "(" + m.deadRecent + " in the last " + fmtAge(m.deadRecentWindowSeconds) + ")" : "");
    let rows;
    if (!m.deadByClass) rows = [el("tr", {}, el("td", {colspan: 4}, "? (" + ((m.errors || [])[0] || "unknown") + ")"))];
    else {
      const classes = Object.keys(m.deadByClass).sort((a, b) => m.deadByClass[b] - m.deadByClass[a] || a.localeCompare(b));
      rows = classes.map(c => {
        const latest = ((m.deadLatestByClass || {})[c] || []).map(d =>
          el("div", {}, el("a", {href: "/trace/" + d.msgId + "?format=html"}, "#" + d.msgId), " " + stamp(d.enqueuedAt) + ": " +
            (d.lastError || "(no reason recorded)")));
        return el("tr", {"data-class": c},
          el("td", {}, c),
          el("td", {class: "num"}, m.deadByClass[c]),
          el("td", {class: "reason"}, ...latest),
          replayCell(c, (m.deadReplayable || {})[c]));
      });
      if (!rows.length) rows = [el("tr", {}, el("td", {colspan: 4, class: "ok"}, "none"))];
    }
    fillRows("dead", rows);

    fillRows("messages", STATES.map(st => {
      const n = m.byState ? m.byState[st] : undefined;
      const detail = st === "SKIPPED" ? fmtCounts(m.skippedByReasonClass) : st === "DEAD" ? fmtCounts(m.deadByClass) : "";
      return el("tr", {"data-state": st}, el("td", {}, st), el("td", {class: "num"}, n === undefined ? "?" : n), el("td", {}, detail));
    }));
  }

  function renderBackfill(rep) {
    const b = rep.backfill;
    const ab = b.abandoned;
    setText("abandoned", ab ? fmtCounts(ab) : "? (" + ((b.errors || [])[0] || "unknown") + ")",
      ab && Object.keys(ab).length ? "bad" : ab ? "ok" : "bad");
    let p = count(b.overdue) + " overdue (pending longer than " + fmtAge(b.overdueAfterSeconds) + "), " + count(b.pending) + " pending";
    if (known(b.oldestPendingAgeSeconds)) p += ", oldest " + fmtAge(b.oldestPendingAgeSeconds);
    setText("backfill-pending", p, b.overdue > 0 ? "bad" : "");
  }

  // traceLink is a link to a message's trace page.
  function traceLink(id) { return el("a", {href: "/trace/" + id + "?format=html"}, "#" + id); }

  // describeRequest names a request: "#3 (SEQN 17, flights …)".
  function describeRequest(r) {
    const what = r.kind === "RQFD" && r.windowFrom ? "flights " + stamp(r.windowFrom) + " – " + stamp(r.windowTo)
      : "categories " + (r.categories || []).join(",");
    return "#" + r.id + " (SEQN " + r.seqn + ", " + what + ")";
  }

  function requestCell(r, state, q) {
    if (!r) return el("td", {class: "muted"}, "–");
    if (state === "open") {
      const late = r.ageSeconds >= q.timeoutSeconds;
      return el("td", {class: late ? "bad" : "warn"}, describeRequest(r) + " " + r.state + " for " + fmtAge(r.ageSeconds) +
        (r.lastError ? ": " + r.lastError : ""));
    }
    const parts = [describeRequest(r) + " closed " + stamp(r.closedAt)];
    if (state === "DONE") parts.push(", answered by ", traceLink(r.answerMsgId));
    else if (state === "FAILED") {
      parts.push(", ");
      if (r.answerMsgId) parts.push("EROR ", traceLink(r.answerMsgId));
      const said = [r.erorCode, r.erorText].filter(Boolean).join(" ");
      if (said) parts.push(": " + said);
    } else parts.push(", " + r.closeReason);
    const latest = (q.latest || {})[r.kind];
    const bad = latest && latest.id === r.id && state !== "DONE";
    return el("td", {class: bad ? "bad" : ""}, ...parts);
  }

  function renderRequests(rep) {
    const q = rep.requests;
    setText("requests-timeout", "(MSGX_REQUEST_TIMEOUT " + fmtAge(q.timeoutSeconds) + ")");
    if (!q.latest) {
      fillRows("requests", [el("tr", {}, el("td", {colspan: 5, class: "bad"}, "? (" + ((q.errors || [])[0] || "unknown") + ")"))]);
    } else {
      fillRows("requests", ["RQFD", "RQRD"].map(k => {
        const open = (q.open || []).find(o => o.kind === k);
        const closed = (q.lastClosed || {})[k] || {};
        return el("tr", {"data-kind": k}, el("td", {}, k),
          open ? requestCell(open, "open", q) : el("td", {class: "ok"}, "none"),
          requestCell(closed.DONE, "DONE", q), requestCell(closed.FAILED, "FAILED", q), requestCell(closed.EXPIRED, "EXPIRED", q));
      }));
    }
    const dd = byId("eror-unpaired");
    if (!known(q.unpairedErors)) setText("eror-unpaired", "?", "bad");
    else if (q.unpairedErors === 0) setText("eror-unpaired", "none", "ok");
    else {
      const u = q.latestUnpaired;
      dd.replaceChildren(String(q.unpairedErors), ...(u ? ["; latest ", traceLink(u.msgId), " " + stamp(u.at) +
        ([u.code, u.text].filter(Boolean).length ? " (" + [u.code, u.text].filter(Boolean).join(" ") + ")" : "") + ": " + u.detail] : []));
      dd.className = "bad";
    }
  }

  function renderGroups(rep) {
    if (!rep.groups) {
      setText("memberless", "? (" + (rep.groupsError || "unknown") + ")", "bad");
      fillRows("groups", [el("tr", {}, el("td", {colspan: 7, class: "bad"}, "? " + (rep.groupsError || "")))]);
      return;
    }
    const waiting = new Map();
    for (const g of rep.groups) {
      if (g.members === 0) waiting.set(g.group, (waiting.get(g.group) || 0) + (g.lag > 0 ? g.lag : 0));
    }
    setText("memberless", waiting.size
      ? [...waiting].map(([g, n]) => g + " (" + n + " records waiting)").join(", ")
      : "none (every group has a member)", waiting.size ? "bad" : "ok");
    fillRows("groups", rep.groups.map(g => el("tr", {"data-group": g.group, "data-topic": g.topic},
      el("td", {}, g.group), el("td", {}, g.topic), el("td", {}, g.error ? g.state + " (" + g.error + ")" : g.state),
      el("td", {class: "num"}, g.members), el("td", {class: "num"}, g.committed < 0 ? "none" : g.committed),
      el("td", {class: "num"}, g.end), el("td", {class: "num"}, g.lag))));
  }

  function renderPublisher(rep) {
    const p = rep.publisher;
    if (!p) {
      for (const id of ["pub-mode", "pub-transactions", "pub-fenced", "pub-position", "pub-events"]) setText(id, "–", "muted");
      setText("pub-mode", "not run by this process (a standby, or the ingest role)", "muted");
      return;
    }
    setText("pub-events", p.published + " published, " + p.deduplicated + " duplicates not published, " + p.reconciled + " reconciled at start-up");
    if (!p.exactlyOnce) {
      setText("pub-mode", "at least once (MSGX_EXACTLY_ONCE=false): consumers de-duplicate by (FLID, stateVersion)", "warn");
      for (const id of ["pub-transactions", "pub-fenced", "pub-position"]) setText(id, "–", "muted");
      return;
    }
    setText("pub-mode", "exactly once for read_committed consumers: Kafka transactions as " + p.transactionalId);
    setText("pub-transactions", p.committed + " committed, " + p.aborted + " aborted", p.aborted > 0 ? "warn" : "");
    if (p.fenced) setText("pub-fenced", "since " + stamp(p.fencedAt) + ": " + p.fenced, "bad");
    else setText("pub-fenced", "no", "ok");
    setText("pub-position", String(p.position));
  }

  function renderComponents(rep) {
    const cs = rep.components || [];
    fillRows("components", cs.length ? cs.map(c => el("tr", {
      "data-component": c.name,
      class: c.state === "running" || c.state === "standby" ? "state-" + c.state : "state-bad",
    }, el("td", {}, c.name), el("td", {}, c.state), el("td", {}, c.lastError || ""), el("td", {}, c.lastErrorAt ? stamp(c.lastErrorAt) : "")))
      : [el("tr", {}, el("td", {colspan: 4}, "none reported"))]);
  }

  function render(rep, hist) {
    renderAlerts(rep);
    renderInbox(rep);
    renderMessages(rep);
    renderBackfill(rep);
    renderRequests(rep);
    renderGroups(rep);
    renderPublisher(rep);
    renderComponents(rep);
    drawHistory(hist);
  }

  // --- refresh -----------------------------------------------------------

  async function getJSON(path) {
    const r = await fetch(path, {credentials: "same-origin", cache: "no-store", headers: {Accept: "application/json"}});
    if (r.status === 401) {
      const e = new Error("not logged in");
      e.auth = true;
      throw e;
    }
    if (!r.ok) throw new Error(path + ": " + r.status + " " + (await r.text()).slice(0, 200));
    return r.json();
  }

  async function refresh() {
    if (busy) return;
    busy = true;
    try {
      const [rep, hist] = await Promise.all([getJSON("/status"), getJSON("/status/history")]);
      render(rep, hist);
      lastOK = new Date();
      refreshes++;
      document.body.dataset.refreshes = String(refreshes);
      document.body.classList.remove("stale");
      byId("refresh-error").hidden = true;
      byId("login-needed").hidden = true;
      setText("updated", "report of " + stamp(rep.generatedAt) + ", refreshed every " + REFRESH_MS / 1000 + " s", "muted");
    } catch (e) {
      document.body.classList.add("stale");
      byId("login-needed").hidden = !e.auth;
      const err = byId("refresh-error");
      err.hidden = false;
      err.textContent = "refresh failed at " + clockTime(new Date()) + ": " + e.message +
        (lastOK ? " — showing the data of " + clockTime(lastOK) : "");
    } finally {
      busy = false;
    }
  }

  // A hidden tab does not refresh: every refresh takes a status report.
  setInterval(() => { if (!document.hidden) refresh(); }, REFRESH_MS);
  document.addEventListener("visibilitychange", () => { if (!document.hidden) refresh(); });
  refresh();
})();
