// larkline incident timeline page. Plain script, no build step, no dependencies.
//
// The page holds no data: it reads the workspace id from its path, asks for an API
// token (kept in sessionStorage, or taken once from #token=… in the URL fragment, which
// browsers never send to servers) and reads the timeline API with a Bearer header. It
// refreshes every REFRESH_MS. Every text from the API is inserted with textContent.
(function () {
  "use strict";

  var REFRESH_MS = 15000;
  var PAGE_LIMIT = 200;          // evidence page size (the API's maximum)
  var MAX_SCAN_PAGES = 50;       // bound on evidence pages read for one refresh
  var LOOKBACK_MS = 60 * 60000;  // messages of an entry are searched from 1 h before it
  var TOKEN_KEY = "larkline.apiToken";

  var KIND_LABELS = {
    impact: "Impact", finding: "Finding", decision: "Decision", ownership: "Ownership",
    mitigation: "Mitigation", root_cause: "Root cause", recovery: "Recovery",
    next_step: "Next step", blocker: "Blocker"
  };
  var STATUS_LABELS = { draft: "Draft", confirmed: "Confirmed", hidden: "Hidden" };

  var $ = function (id) { return document.getElementById(id); };

  var state = {
    ws: "",
    token: "",
    timeline: null,       // last /timeline answer
    summary: undefined,   // last /summary answer; null when the workspace has none
    open: new Set(),      // ids of expanded entries
    expandAll: false,
    compare: "",          // ?compare=B: a processor version to compare with the serving one
    comparison: null,     // last /compare answer
    evidence: new Map(),  // evidence id -> item
    missing: new Set(),   // evidence ids the listing no longer holds
    listing: "unknown",   // "enabled" | "disabled" | "unknown"
    lastOk: null,
    error: null,          // the last refresh failure, cleared by a success
    inflight: false,
    timer: 0
  };

  // ---- time formatting: local time on screen, UTC on hover ----

  var timeFmt = new Intl.DateTimeFormat(undefined, { hour: "2-digit", minute: "2-digit", second: "2-digit", hourCycle: "h23" });
  var shortTimeFmt = new Intl.DateTimeFormat(undefined, { hour: "2-digit", minute: "2-digit", hourCycle: "h23" });
  var dayFmt = new Intl.DateTimeFormat(undefined, { weekday: "short", day: "numeric", month: "short", year: "numeric" });

  function utcTitle(d) {
    return d.toISOString().replace("T", " ").replace(/\.\d+Z$/, "").replace(/Z$/, "") + " UTC";
  }

  function timeEl(iso, fmt) {
    var d = new Date(iso);
    var t = document.createElement("time");
    t.dateTime = iso;
    t.textContent = (fmt || timeFmt).format(d);
    t.title = utcTitle(d);
    return t;
  }

  function dayKey(d) {
    return d.getFullYear() + "-" + d.getMonth() + "-" + d.getDate();
  }

  function ago(d) {
    var s = Math.max(0, Math.round((Date.now() - d.getTime()) / 1000));
    if (s < 90) return s + " s ago";
    var m = Math.round(s / 60);
    if (m < 90) return m + " min ago";
    var h = Math.round(m / 60);
    if (h < 48) return h + " h ago";
    return Math.round(h / 24) + " d ago";
  }

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = text;
    return e;
  }

  function kindLabel(k) {
    if (KIND_LABELS[k]) return KIND_LABELS[k];
    var s = String(k || "entry").replace(/_/g, " ");
    return s.charAt(0).toUpperCase() + s.slice(1);
  }

  function kindClass(k) {
    return KIND_LABELS[k] ? "kind-" + k : "kind-other";
  }

  function plural(n, one, many) { return n + " " + (n === 1 ? one : many); }

  // ---- API ----

  function ApiError(status, code, message) {
    this.status = status;
    this.code = code;
    this.message = message;
  }

  function api(path) {
    var url = "/api/v1/workspaces/" + encodeURIComponent(state.ws) + path;
    return fetch(url, {
      headers: { "Authorization": "Bearer " + state.token, "Accept": "application/json" },
      cache: "no-store",
      credentials: "omit",
      redirect: "error"
    }).then(function (res) {
      return res.json().catch(function () { return null; }).then(function (body) {
        if (!res.ok) {
          var e = body && body.error ? body.error : {};
          throw new ApiError(res.status, e.code || "http_" + res.status, e.message || res.statusText);
        }
        return body;
      });
    }, function () {
      throw new ApiError(0, "network", "the server cannot be reached");
    });
  }

  // ---- evidence: the messages behind entries ----

  // scan reads evidence pages from `since` (or from the start) and caches every item,
  // until every id in need was seen, the listing ends, an item at or after stopAt is
  // reached, or MAX_SCAN_PAGES were read.
  function scan(need, since, stopAt, pages) {
    var cursor = "";
    function next() {
      if (need.size === 0 || pages.n >= MAX_SCAN_PAGES) return Promise.resolve();
      var q = new URLSearchParams({ limit: String(PAGE_LIMIT) });
      if (cursor) q.set("cursor", cursor); else if (since) q.set("since", since);
      pages.n++;
      return api("/evidence?" + q.toString()).then(function (page) {
        var stop = false;
        page.items.forEach(function (it) {
          state.evidence.set(it.id, it);
          state.missing.delete(it.id);
          need.delete(it.id);
          if (stopAt && Date.parse(it.occurred_at) >= stopAt) stop = true;
        });
        if (!page.next_cursor || stop) return;
        cursor = page.next_cursor;
        return next();
      });
    }
    return next();
  }

  // loadEvidence fetches the messages of the expanded entries. With fresh, it reads
  // them again (a message may have been edited or recalled since).
  function loadEvidence(fresh) {
    if (state.listing === "disabled" || !state.timeline) return Promise.resolve();
    var need = new Set();
    var earliest = Infinity;
    state.timeline.entries.forEach(function (e) {
      if (!state.open.has(e.id)) return;
      e.evidence_ids.forEach(function (id) {
        if (fresh || (!state.evidence.has(id) && !state.missing.has(id))) {
          need.add(id);
          earliest = Math.min(earliest, Date.parse(e.occurred_at));
        }
      });
    });
    if (need.size === 0) return Promise.resolve();
    var since = new Date(earliest - LOOKBACK_MS);
    var pages = { n: 0 };
    return scan(need, since.toISOString(), 0, pages).then(function () {
      // Messages older than the look-back (e.g. bound by a person): from the start.
      if (need.size > 0) return scan(need, "", since.getTime(), pages);
    }).then(function () {
      if (pages.n < MAX_SCAN_PAGES) need.forEach(function (id) { state.missing.add(id); });
      state.listing = "enabled";
    }, function (err) {
      if (err.code === "evidence_listing_disabled") { state.listing = "disabled"; return; }
      throw err;
    });
  }

  // ---- rendering ----

  function renderHeader() {
    var tl = state.timeline;
    $("ws-id").textContent = state.ws;
    document.title = state.ws + (tl ? " · " + tl.workspace.status : "") + " · larkline timeline";
    var pill = $("ws-status");
    var age = $("ws-age");
    if (tl) {
      pill.hidden = false;
      pill.textContent = tl.workspace.status;
      pill.className = "pill pill-" + tl.workspace.status;
      age.hidden = false;
      age.textContent = "opened " + ago(new Date(tl.workspace.created_at));
      age.title = utcTitle(new Date(tl.workspace.created_at));
    }
  }

  function renderFreshness() {
    var f = $("freshness");
    if (!state.lastOk) { f.textContent = ""; return; }
    f.textContent = "";
    f.appendChild(el("span", "live-dot" + (state.error ? " stale" : "")));
    f.appendChild(document.createTextNode("Updated "));
    f.appendChild(timeEl(state.lastOk.toISOString()));
    f.appendChild(document.createTextNode(" · every " + REFRESH_MS / 1000 + " s"));
  }

  function renderSummary() {
    var sec = $("summary");
    sec.hidden = false;
    var meta = $("summary-meta");
    var text = $("summary-text");
    meta.textContent = "";
    var s = state.summary;
    if (!s || s.text === "") {
      text.className = "summary-text empty-summary";
      text.textContent = s ? "The summary was cleared by a person." : "No summary yet.";
      if (!s) return;
    } else {
      text.className = "summary-text";
      text.textContent = s.text;
    }
    meta.appendChild(el("span", "src-badge src-" + s.source, s.source === "human" ? "Written by a person" : "AI draft"));
    meta.appendChild(document.createTextNode(" updated "));
    meta.appendChild(timeEl(s.updated_at, shortTimeFmt));
  }

  function renderMessages(entry, box) {
    box.textContent = "";
    var ids = entry.evidence_ids;
    if (state.listing === "disabled") {
      box.appendChild(el("p", "note", "Messages are not listed by this server (evidence listing is off in its configuration)."));
      return;
    }
    var items = [];
    var missing = 0;
    var pending = 0;
    ids.forEach(function (id) {
      var it = state.evidence.get(id);
      if (it) items.push(it);
      else if (state.missing.has(id)) missing++;
      else pending++;
    });
    items.sort(function (a, b) {
      return Date.parse(a.occurred_at) - Date.parse(b.occurred_at) || a.id - b.id;
    });
    var redacted = items.filter(function (it) { return it.deleted; }).length;
    if (redacted > 0) {
      box.appendChild(el("p", "note redaction-note",
        plural(redacted, "message was", "messages were") + " recalled in Lark; " +
        (redacted === 1 ? "its content is" : "their content is") + " redacted."));
    }
    var list = el("ol", "msgs");
    items.forEach(function (it) {
      var li = el("li", "msg" + (it.deleted ? " msg-redacted" : ""));
      li.dataset.evidenceId = it.id;
      var head = el("div", "msg-head");
      var who = el("span", "who", it.actor_display_name || it.actor_id || "Unknown sender");
      if (it.actor_display_name && it.actor_id) who.title = it.actor_id;
      head.appendChild(who);
      head.appendChild(timeEl(it.occurred_at));
      li.appendChild(head);
      if (it.deleted) {
        li.appendChild(el("div", "msg-text redacted", "Message recalled — content redacted"));
      } else {
        li.appendChild(el("div", "msg-text", it.content || "(no text)"));
      }
      list.appendChild(li);
    });
    box.appendChild(list);
    if (pending > 0) box.appendChild(el("p", "note", "Loading " + plural(pending, "message", "messages") + "…"));
    if (missing > 0) {
      box.appendChild(el("p", "note", plural(missing, "message is", "messages are") +
        " no longer available (removed by retention, or beyond the page's reach)."));
    }
  }

  function renderEntry(e) {
    var li = el("li", "entry " + kindClass(e.kind) + " entry-" + e.status);
    li.dataset.entryId = e.id;
    li.dataset.kind = e.kind;
    li.dataset.status = e.status;

    var row = el("div", "entry-row");
    row.appendChild(timeEl(e.occurred_at));
    row.lastChild.className = "entry-time";
    row.appendChild(el("span", "kind " + kindClass(e.kind), kindLabel(e.kind)));

    var main = el("div", "entry-main");
    main.appendChild(el("div", "entry-title", e.title));
    if (e.body) main.appendChild(el("div", "entry-body", e.body));

    var foot = el("div", "entry-foot");
    foot.appendChild(el("span", "status status-" + e.status, STATUS_LABELS[e.status] || e.status));
    foot.appendChild(el("span", "src src-" + e.source, e.source === "human" ? "by a person" : "AI"));
    if (e.human_edited && e.source !== "human") {
      var ed = el("span", "edited", "edited by a person");
      if (e.human_edited_at) ed.title = utcTitle(new Date(e.human_edited_at));
      foot.appendChild(ed);
    }
    if (e.needs_review) {
      var rv = el("span", "needs-review", "needs review: a cited message was recalled");
      if (e.needs_review_at) rv.title = utcTitle(new Date(e.needs_review_at));
      foot.appendChild(rv);
      li.classList.add("entry-needs-review");
    }
    var n = e.evidence_ids.length;
    var open = n > 0 && state.open.has(e.id);
    if (n > 0) {
      var btn = el("button", "msgs-toggle", (open ? "▾ " : "▸ ") + plural(n, "message", "messages"));
      btn.type = "button";
      btn.setAttribute("aria-expanded", open ? "true" : "false");
      btn.addEventListener("click", function () { toggleEntry(e.id); });
      foot.appendChild(btn);
    }
    main.appendChild(foot);

    if (open) {
      var box = el("div", "msgs-box");
      renderMessages(e, box);
      main.appendChild(box);
    }
    row.appendChild(main);
    li.appendChild(row);
    return li;
  }

  function renderEntries() {
    var tl = state.timeline;
    $("timeline").hidden = false;
    var list = $("entries");
    var entries = tl.entries;
    $("empty").hidden = entries.length > 0;
    $("timeline-meta").textContent = entries.length ? plural(entries.length, "entry", "entries") : "";
    var items = [];
    var lastDay = "";
    entries.forEach(function (e) {
      var d = new Date(e.occurred_at);
      var k = dayKey(d);
      if (k !== lastDay) {
        var day = el("li", "day", dayFmt.format(d));
        day.setAttribute("aria-hidden", "true");
        items.push(day);
        lastDay = k;
      }
      items.push(renderEntry(e));
    });
    list.replaceChildren.apply(list, items);
    var all = $("toggle-all");
    all.hidden = expandable().length === 0;
    all.textContent = allOpen() ? "Collapse all" : "Expand all";
  }

  // expandable: entries with messages behind them.
  function expandable() {
    return (state.timeline ? state.timeline.entries : []).filter(function (e) { return e.evidence_ids.length > 0; });
  }

  function allOpen() {
    var es = expandable();
    return es.length > 0 && es.every(function (e) { return state.open.has(e.id); });
  }

  // renderCompare shows what processor version state.compare wrote differently from
  // the serving one: counts first, then each entry (text via textContent, as always).
  function renderCompare() {
    var c = state.comparison;
    var sec = $("compare");
    if (!state.compare || !c) { sec.hidden = true; return; }
    sec.hidden = false;
    $("compare-version").textContent = c.version;
    $("compare-meta").textContent = "serving: " + c.serving;
    $("compare-counts").textContent =
      plural(c.only_version.length, "entry", "entries") + " only in " + c.version + ", " +
      plural(c.only_serving.length, "entry", "entries") + " only in " + c.serving + ", " +
      c.changed.length + " changed; summary " + (c.summary_changed ? "changed" : "the same") + "; " +
      plural(c.windows_only_version, "window", "windows") + " closed only by " + c.version + ", " +
      plural(c.windows_only_serving, "window", "windows") + " only by " + c.serving + ".";
    var items = [];
    function line(cls, side, e, old) {
      var li = el("li", "compare-" + cls);
      li.dataset.compare = cls;
      li.appendChild(el("span", "compare-side", side));
      li.appendChild(timeEl(e.occurred_at));
      li.appendChild(document.createTextNode(" "));
      li.appendChild(el("span", "kind " + kindClass(e.kind), kindLabel(e.kind)));
      li.appendChild(document.createTextNode(" "));
      if (old) li.appendChild(el("span", "compare-old", old.title));
      if (old) li.appendChild(document.createTextNode(" → "));
      li.appendChild(el("span", "compare-title", e.title));
      items.push(li);
    }
    c.only_version.forEach(function (e) { line("only-version", "Only in " + c.version, e); });
    c.only_serving.forEach(function (e) { line("only-serving", "Only in " + c.serving, e); });
    c.changed.forEach(function (p) { line("changed", "Changed", p.version, p.serving); });
    var list = $("compare-list");
    list.replaceChildren.apply(list, items);
  }

  function render() {
    renderHeader();
    renderFreshness();
    if (!state.timeline) return;
    $("auth").hidden = true;
    $("fatal").hidden = true;
    $("forget-token").hidden = false;
    renderSummary();
    renderEntries();
    renderCompare();
  }

  function showBanner(text) {
    var b = $("banner");
    b.hidden = !text;
    b.textContent = text || "";
  }

  function showAuth(reason) {
    stopTimer();
    state.timeline = null;
    document.body.dataset.state = "auth";
    $("auth").hidden = false;
    $("auth-reason").textContent = reason;
    ["summary", "timeline", "fatal", "compare"].forEach(function (id) { $(id).hidden = true; });
    $("toggle-all").hidden = true;
    $("forget-token").hidden = !state.token;
    showBanner("");
    $("auth-token").focus();
  }

  function showFatal(title, text) {
    stopTimer();
    document.body.dataset.state = "error";
    $("fatal").hidden = false;
    $("fatal-title").textContent = title;
    $("fatal-text").textContent = text;
    ["summary", "timeline", "auth", "compare"].forEach(function (id) { $(id).hidden = true; });
    showBanner("");
  }

  // ---- behaviour ----

  function toggleEntry(id) {
    if (state.open.has(id)) state.open.delete(id); else state.open.add(id);
    renderEntries();
    loadEvidence(false).then(renderEntries, handleError);
  }

  function toggleAll() {
    var open = !allOpen();
    state.open.clear();
    if (open) expandable().forEach(function (e) { state.open.add(e.id); });
    renderEntries();
    if (open) loadEvidence(false).then(renderEntries, handleError);
  }

  function handleError(err) {
    if (!(err instanceof ApiError)) err = new ApiError(0, "client", String(err && err.message || err));
    switch (err.code) {
      case "missing_token":
      case "invalid_token":
        forgetToken();
        showAuth("The server refused the token. Enter a valid API token.");
        return;
      case "forbidden_workspace":
        forgetToken();
        showAuth("This token does not grant workspace " + state.ws + ". Enter a token that does.");
        return;
      case "api_disabled":
        showFatal("The API is disabled", "This server has no API tokens configured, so it answers no timeline request.");
        return;
      case "workspace_not_found":
        showFatal("No such workspace", "The server knows no workspace " + state.ws + ".");
        return;
      case "version_not_found":
      case "invalid_version":
        showFatal("No such processor version", "The server knows no processor version \u201c" + state.compare +
          "\u201d to compare with (see larkline versions list).");
        return;
      case "invalid_workspace_id":
        showFatal("Not a workspace id", "\u201c" + state.ws + "\u201d is not a valid workspace id.");
        return;
    }
    state.error = err;
    var what = err.status ? "HTTP " + err.status + " " + err.code : "the server cannot be reached";
    showBanner("Could not refresh (" + what + ")" +
      (state.lastOk ? "; showing the timeline as of " + timeFmt.format(state.lastOk) : "") + ". Retrying.");
    if (!state.timeline) document.body.dataset.state = "error";
    renderFreshness();
  }

  function refresh() {
    if (state.inflight || !state.token) return;
    state.inflight = true;
    var summary = api("/summary").catch(function (err) {
      if (err.code === "summary_not_found") return null;
      throw err;
    });
    var comparison = state.compare ?
      api("/compare?" + new URLSearchParams({ version: state.compare }).toString()) : Promise.resolve(null);
    Promise.all([api("/timeline"), summary, comparison]).then(function (res) {
      state.timeline = res[0];
      state.summary = res[1];
      state.comparison = res[2];
      state.lastOk = new Date();
      state.error = null;
      if (!state.timeline.evidence_listed) state.listing = "disabled";
      else if (state.listing === "disabled") state.listing = "unknown";
      var present = new Set(state.timeline.entries.map(function (e) { return e.id; }));
      state.open.forEach(function (id) { if (!present.has(id)) state.open.delete(id); });
      if (state.expandAll) expandable().forEach(function (e) { state.open.add(e.id); });
      showBanner("");
      render();
      return loadEvidence(true).then(render);
    }).then(function () {
      if (document.body.dataset.state !== "auth" && document.body.dataset.state !== "error") {
        document.body.dataset.state = "ready";
      }
    }, handleError).then(function () {
      state.inflight = false;
    });
  }

  function stopTimer() {
    if (state.timer) clearInterval(state.timer);
    state.timer = 0;
  }

  function start() {
    stopTimer();
    document.body.dataset.state = "loading";
    $("auth").hidden = true;
    refresh();
    state.timer = setInterval(refresh, REFRESH_MS);
  }

  function forgetToken() {
    state.token = "";
    try { sessionStorage.removeItem(TOKEN_KEY); } catch (e) { /* storage disabled */ }
  }

  function saveToken(t) {
    state.token = t;
    try { sessionStorage.setItem(TOKEN_KEY, t); } catch (e) { /* storage disabled: keep it in memory */ }
  }

  function init() {
    var m = /^\/workspaces\/([^/]+)\/?$/.exec(location.pathname);
    state.ws = m ? decodeURIComponent(m[1]) : "";
    $("ws-id").textContent = state.ws;
    var zone = Intl.DateTimeFormat().resolvedOptions().timeZone || "local time";
    $("tz-note").textContent = "Times are in " + zone + "; hover a time for UTC.";

    // #token=…&expand=all: take the token, then drop it from the address bar and history.
    var frag = new URLSearchParams(location.hash.replace(/^#/, ""));
    if (frag.get("token")) {
      saveToken(frag.get("token"));
      frag.delete("token");
      var rest = frag.toString();
      history.replaceState(null, "", location.pathname + location.search + (rest ? "#" + rest : ""));
    } else {
      try { state.token = sessionStorage.getItem(TOKEN_KEY) || ""; } catch (e) { state.token = ""; }
    }
    state.expandAll = frag.get("expand") === "all";
    state.compare = new URLSearchParams(location.search).get("compare") || "";

    $("auth-form").addEventListener("submit", function (ev) {
      ev.preventDefault();
      var t = $("auth-token").value.trim();
      if (!t) return;
      $("auth-token").value = "";
      saveToken(t);
      start();
    });
    $("forget-token").addEventListener("click", function () {
      forgetToken();
      showAuth("Token forgotten. Enter an API token to open the timeline.");
    });
    $("toggle-all").addEventListener("click", toggleAll);
    document.addEventListener("visibilitychange", function () {
      if (!document.hidden && state.token && state.timer &&
          (!state.lastOk || Date.now() - state.lastOk.getTime() > REFRESH_MS)) {
        refresh();
      }
    });

    if (!state.ws) {
      showFatal("Not a workspace page", "Open /workspaces/<workspace id>.");
      return;
    }
    if (!state.token) {
      showAuth("Enter an API token for workspace " + state.ws + ".");
      return;
    }
    start();
  }

  init();
})();
