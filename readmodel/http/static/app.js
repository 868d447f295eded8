// sessionq web page: sessions by workspace (browse.js), search grouped by session,
// session view (readable events: transcript.js; surface, replacements, lineage),
// export, live updates (GET /api/events), keyboard. Plain JS, no build step.
//
// State lives in the URL fragment: #q=<query>[&mode=phrase|substring],
// #session=<id>[&q=<query>][&seq=<n>], the filters ws=<cwd> | nocwd=1,
// from=/to=<YYYY-MM-DD>, type=<event type>, surface=<surface> (results and the
// session view), plus #token=<bearer token> when the server requires one.
"use strict";
(function () {
  const PAGE_SIZE = 20;          // sessions per search page
  const EVENT_PAGE = 5;          // extra matches per session, per click
  const RENDER_BATCH = 2000;     // events rendered before a "show more" button
  // Sessions longer than this are read in ranges (readEventRange) instead of whole.
  const FULL_LIMIT = window.SESSIONQ_FULL_LIMIT || 20000;
  const RANGE = window.SESSIONQ_RANGE || 2000;

  const T = window.SessionqTranscript;
  const main = document.getElementById("main");
  const form = document.getElementById("search-form");
  const input = document.getElementById("q");
  const indexStatus = document.getElementById("index-status");

  // ------------------------------------------------------------------ helpers

  function parseHash() {
    const out = {};
    for (const part of location.hash.replace(/^#/, "").split("&")) {
      if (!part) continue;
      const eq = part.indexOf("=");
      const key = eq < 0 ? part : part.slice(0, eq);
      try { out[key] = eq < 0 ? "" : decodeURIComponent(part.slice(eq + 1)); } catch (e) { /* ignore malformed */ }
    }
    return out;
  }

  const token = parseHash().token || null;

  function hashFor(params) {
    const parts = [];
    for (const [k, v] of Object.entries(params)) {
      if (v !== undefined && v !== null && v !== "") parts.push(k + "=" + encodeURIComponent(v));
    }
    // a query travels with its search mode (words, the default, is left out)
    if (params.q && !("mode" in params) && searchMode() !== DEFAULT_MODE && modesSupported) parts.push("mode=" + searchMode());
    if (token) parts.push("token=" + encodeURIComponent(token));
    return "#" + parts.join("&");
  }

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === "class") node.className = v;
      else if (k.startsWith("on") && typeof v === "function") node[k] = v;
      else node.setAttribute(k, v === true ? "" : v);
    }
    for (const child of children.flat(Infinity)) {
      if (child === undefined || child === null || child === false) continue;
      node.append(child instanceof Node ? child : String(child));
    }
    return node;
  }

  async function rpc(method, params) {
    const headers = { "content-type": "application/json" };
    if (token) headers.authorization = "Bearer " + token;
    let response;
    try {
      response = await fetch("/api/rpc/" + method, { method: "POST", headers, body: JSON.stringify(params || {}) });
    } catch (error) {
      throw new Error("The sessionq server cannot be reached (" + error.message + ").");
    }
    let body = null;
    try { body = await response.json(); } catch (e) { /* not JSON */ }
    if (!response.ok) {
      const err = body && body.error;
      const error = new Error(err ? err.code + ": " + err.message : "HTTP " + response.status);
      error.code = err && err.code;
      throw error;
    }
    return body;
  }

  // A time in the viewer's zone (with its name), UTC on hover; 0 or missing is unknown.
  function when(ms) {
    if (typeof ms !== "number" || !isFinite(ms) || ms <= 0) return el("span", { class: "time-unknown", title: "no time recorded" }, "unknown");
    const d = new Date(ms);
    const pad = (n) => String(n).padStart(2, "0");
    let zone = "";
    try { zone = new Intl.DateTimeFormat(undefined, { timeZoneName: "short" }).formatToParts(d).find((p) => p.type === "timeZoneName").value; } catch (e) { /* no Intl zone names */ }
    const local = d.getFullYear() + "-" + pad(d.getMonth() + 1) + "-" + pad(d.getDate()) + " " +
      pad(d.getHours()) + ":" + pad(d.getMinutes()) + ":" + pad(d.getSeconds()) + (zone ? " " + zone : "");
    return el("time", { datetime: d.toISOString(), title: d.toISOString().replace("T", " ").replace(/\.\d+Z$/, " UTC") }, local);
  }

  function plural(n, word) { return n + " " + word + (n === 1 ? "" : "s"); }

  // ------------------------------------------------------------------ highlighting
  //
  // Marks follow the search mode (below). Tokens are the unicode61 tokenizer's
  // (letters, numbers, private use), compared case- and diacritic-insensitively:
  // a phrase is consecutive tokens; words are tokens anywhere (the last one also
  // as a prefix); a substring is the literal text in any case. The same rules
  // mark snippets and event text.

  const TOKEN = /[\p{L}\p{N}\p{Co}]+/gu;
  function fold(s) { return s.normalize("NFD").replace(/\p{M}/gu, "").toLowerCase(); }
  function tokenize(text) {
    const out = [];
    for (const m of text.matchAll(TOKEN)) out.push({ start: m.index, end: m.index + m[0].length, key: fold(m[0]) });
    return out;
  }

  // ------------------------------------------------------------------ search modes
  //
  // The server's `match` (a sessionq extension, used only when its OpenAPI
  // document advertises it): words (the page's default: every word, any
  // order, the last one also as a prefix, "quoted parts" as phrases), phrase
  // (the reference's exact phrase), substring (literal text, any case). In the
  // URL as mode= (words left out).

  const MODES = ["words", "phrase", "substring"];
  const DEFAULT_MODE = "words";
  const PLACEHOLDERS = { words: "Search all sessions (all words, any order)", phrase: "Search all sessions (exact phrase, any case)", substring: "Search all sessions (any text, any case)" };
  const modeSelect = document.getElementById("mode");
  let modesSupported = false;
  function searchMode() { return modesSupported ? modeSelect.value : "phrase"; }
  function withMode(params) { return modesSupported ? Object.assign(params, { match: searchMode() }) : params; }

  async function detectModes() {
    try {
      const response = await fetch("/api/openapi.json", { headers: token ? { authorization: "Bearer " + token } : {} });
      const doc = await response.json();
      const schema = doc.paths["/api/rpc/searchSessions"].post.requestBody.content["application/json"].schema;
      modesSupported = Boolean(schema.properties && schema.properties.match);
    } catch (e) { modesSupported = false; } // an older server: phrase only, no control
    modeSelect.hidden = !modesSupported;
  }

  // words: [[token keys], ...] (a bare word is a one-token item, a quoted part a phrase), and whether the last is a prefix
  function wordItems(query) {
    const pieces = query.split('"');
    const items = [];
    pieces.forEach((piece, i) => {
      const keys = tokenize(piece).map((t) => t.key);
      if (!keys.length) return;
      if (i % 2 === 1) items.push(keys); else for (const k of keys) items.push([k]);
    });
    const closed = pieces.length > 1 && pieces.length % 2 === 1 && !pieces[pieces.length - 1].trim();
    return { items, prefix: !closed && !/\s$/.test(query) };
  }

  function matchSpans(text, query) {
    const mode = searchMode();
    if (mode === "substring") return substringSpans(text, query);
    if (mode === "words") return wordSpans(text, query);
    return phraseSpans(text, query);
  }

  function substringSpans(text, query) {
    const words = (query || "").trim().split(/\s+/).filter(Boolean).map((w) => w.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"));
    if (!words.length || !text) return [];
    return [...text.matchAll(new RegExp(words.join("\\s+"), "giu"))].filter((m) => m[0]).map((m) => [m.index, m.index + m[0].length]);
  }

  function wordSpans(text, query) {
    const { items, prefix } = wordItems(query || "");
    if (!items.length || !text) return [];
    const toks = tokenize(text);
    const spans = [];
    for (let i = 0; i < toks.length; i++) {
      for (let n = 0; n < items.length; n++) {
        const item = items[n];
        if (i + item.length > toks.length) continue;
        let ok = true;
        for (let k = 0; k < item.length && ok; k++) {
          const last = prefix && n === items.length - 1 && k === item.length - 1;
          ok = last ? toks[i + k].key.startsWith(item[k]) : toks[i + k].key === item[k];
        }
        if (!ok) continue;
        const span = [toks[i].start, toks[i + item.length - 1].end];
        const prev = spans[spans.length - 1];
        if (prev && span[0] < prev[1]) prev[1] = Math.max(prev[1], span[1]); else spans.push(span);
        break;
      }
    }
    return spans;
  }

  function phraseSpans(text, query) {
    const wanted = tokenize(query || "").map((t) => t.key);
    if (!wanted.length || !text) return [];
    const toks = tokenize(text);
    const spans = [];
    for (let i = 0; i + wanted.length <= toks.length; i++) {
      let ok = true;
      for (let k = 0; k < wanted.length && ok; k++) ok = toks[i + k].key === wanted[k];
      if (!ok) continue;
      const span = [toks[i].start, toks[i + wanted.length - 1].end];
      const last = spans[spans.length - 1];
      if (last && span[0] < last[1]) last[1] = Math.max(last[1], span[1]); // overlapping instances merge
      else spans.push(span);
    }
    if (!spans.length && wanted.length > 1) {
      // a snippet may cut a long phrase at its edge: mark the phrase's tokens instead
      for (const t of toks) if (wanted.includes(t.key)) spans.push([t.start, t.end]);
    }
    return spans;
  }

  function highlight(text, query) {
    const frag = document.createDocumentFragment();
    let last = 0;
    for (const [start, end] of matchSpans(text, query)) {
      frag.append(text.slice(last, start), el("mark", {}, text.slice(start, end)));
      last = end;
    }
    frag.append(text.slice(last));
    return frag;
  }

  // Marks the phrase in every text node under `root` (code and links included).
  function highlightTree(root, query) {
    if (!query) return root;
    const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
    const texts = [];
    while (walker.nextNode()) texts.push(walker.currentNode);
    for (const t of texts) if (matchSpans(t.textContent, query).length) t.replaceWith(highlight(t.textContent, query));
    return root;
  }

  // ------------------------------------------------------------------ links

  function sessionHref(id, extra) { return hashFor(Object.assign({ session: id }, extra || {})); }

  function sessionLink(id, label, extra, attrs) {
    return el("a", Object.assign({ href: sessionHref(id, extra), "data-session-link": id }, attrs || {}), label || id);
  }

  async function titlesFor(ids) {
    const titles = new Map();
    const unique = [...new Set(ids)];
    if (!unique.length) return titles;
    try {
      for (const snap of await rpc("readTitleSnapshots", { sessionIds: unique })) {
        const t = snap.status === "fulfilled" && snap.value && snap.value.title;
        if (t && t.title) titles.set(snap.sessionId, t.title);
      }
    } catch (e) { /* titles are decoration: ids still work */ }
    return titles;
  }

  // cwd · created · id (when a title stands in for it) · parent
  function headerMeta(header, extra, titled) {
    return el("div", { class: "meta" },
      el("code", { class: "cwd", title: "working directory" }, header.cwd || "(no cwd)"),
      el("span", { class: "created" }, when(header.createdAt)),
      titled ? el("code", { class: "sid" }, header.id) : null,
      header.parentSession ? el("span", {}, "child of ", sessionLink(header.parentSession, null, extra)) : null);
  }

  // ------------------------------------------------------------------ views

  let view = 0;          // bumps on every navigation; stale async renders check it
  let lastSearch = null; // {query, node, scroll}: back from a session restores the results

  function show(...nodes) { main.replaceChildren(...nodes.filter((n) => n)); }
  function failure(error) { return el("p", { class: "error" }, error.message || String(error)); }

  let onGeneration = null; // the open view's live refresh (set by each view)

  // ------------------------------------------------------------------ filters
  //
  // In the URL: ws=<cwd> | nocwd=1, from=/to=<YYYY-MM-DD> (local days), type=<event type>, surface=<surface>.

  const SURFACES = ["current", "shadowed", "log-only"];
  const TYPES = ["user/message", "assistant/message", "tool/result", "tool/call", "compaction/summary", "session/title", "assistant/chunk"];

  function dayStart(text) { const d = /^\d{4}-\d{2}-\d{2}$/.test(text || "") ? new Date(text + "T00:00:00") : null; return d && isFinite(d) ? d.getTime() : undefined; }
  function dayEnd(text) { const t = dayStart(text); return t === undefined ? undefined : t + 86400000 - 1; }

  function filtersFrom(h) {
    return { ws: h.ws !== undefined && h.ws !== "" ? h.ws : undefined, nocwd: h.nocwd === "1" || undefined,
      fromDay: dayStart(h.from) !== undefined ? h.from : undefined, toDay: dayEnd(h.to) !== undefined ? h.to : undefined,
      from: dayStart(h.from), to: dayEnd(h.to),
      type: h.type || undefined, surface: SURFACES.includes(h.surface) ? h.surface : undefined };
  }

  function filterParams(f) {
    return { ws: f.ws, nocwd: f.nocwd ? 1 : undefined, from: f.fromDay, to: f.toDay, type: f.type, surface: f.surface };
  }

  // The filter bar; `withEvents`: the event type and surface filters (search only).
  function filterBar(f, query, withEvents) {
    const ws = el("select", { id: "filter-ws", name: "ws", "aria-label": "workspace" }, el("option", { value: "" }, "all workspaces"));
    const chosen = f.nocwd ? "\u0000" : f.ws;
    rpc("listWorkspaces", {}).then((list) => {
      for (const w of list) {
        const value = w.cwd === null ? "\u0000" : w.cwd;
        ws.append(el("option", { value, selected: value === chosen }, w.cwd === null ? "(no workspace)" : w.cwd));
      }
      if (chosen !== undefined && ![...ws.options].some((o) => o.value === chosen)) ws.append(el("option", { value: chosen, selected: true }, chosen));
    }).catch(() => { /* the list is a convenience */ });
    const from = el("input", { type: "date", id: "filter-from", "aria-label": "created from", value: f.fromDay || "" });
    const to = el("input", { type: "date", id: "filter-to", "aria-label": "created to", value: f.toDay || "" });
    const type = withEvents ? el("input", { id: "filter-type", list: "event-types", placeholder: "any event type", "aria-label": "event type", value: f.type || "", size: 16 }) : null;
    const surface = withEvents ? el("select", { id: "filter-surface", "aria-label": "surface" }, el("option", { value: "" }, "any surface"),
      SURFACES.map((x) => el("option", { value: x, selected: x === f.surface }, x))) : null;
    const apply = () => {
      const next = { q: query || undefined, from: from.value || undefined, to: to.value || undefined,
        type: type && type.value.trim() ? type.value.trim() : undefined, surface: surface && surface.value ? surface.value : undefined };
      if (ws.value === "\u0000") next.nocwd = 1; else if (ws.value) next.ws = ws.value;
      lastSearch = null;
      location.hash = hashFor(next);
    };
    for (const control of [ws, from, to, type, surface]) if (control) control.onchange = apply;
    const clear = el("button", { type: "button", class: "link clear-filters" }, "clear filters");
    clear.onclick = () => { lastSearch = null; location.hash = hashFor({ q: query || undefined }); };
    const active = f.ws !== undefined || f.nocwd || f.from !== undefined || f.to !== undefined || f.type || f.surface;
    return el("form", { class: "filters", role: "group", "aria-label": "filters", onsubmit: (e) => { e.preventDefault(); apply(); } },
      el("label", {}, "Workspace ", ws), el("label", {}, "Created from ", from), el("label", {}, "to ", to),
      withEvents ? el("label", {}, "Event type ", type, el("datalist", { id: "event-types" }, TYPES.map((t) => el("option", { value: t })))) : null,
      withEvents ? el("label", {}, "Surface ", surface) : null,
      active ? clear : null);
  }

  async function home(f) {
    const my = ++view;
    document.title = "sessionq";
    const view_ = window.SessionqBrowse({ el, rpc, when, plural, failure, hashFor, sessionHref, staleHint }, f);
    show(filterBar(f, "", false), view_.node);
    try { await view_.ready; } catch (error) { if (my === view) show(failure(error)); return; }
    if (my === view) onGeneration = view_.refresh;
  }

  async function refreshStatus() {
    try {
      const s = await rpc("status", {});
      indexStatus.textContent = plural(s.sessions, "session") + " · " + plural(s.events, "event") + " indexed";
    } catch (e) {
      indexStatus.textContent = "";
    }
  }

  // searchSessions' params for a query and the page's filters.
  function searchParams(query, f) {
    const params = withMode({ query });
    const sessionFilters = [];
    if (f.nocwd) sessionFilters.push({ kind: "cwd", values: [null] });
    else if (f.ws !== undefined) sessionFilters.push({ kind: "cwd", values: [f.ws] });
    if (f.from !== undefined || f.to !== undefined) sessionFilters.push(Object.assign({ kind: "created-at" }, f.from !== undefined ? { from: f.from } : {}, f.to !== undefined ? { to: f.to } : {}));
    const eventFilters = [];
    if (f.type) eventFilters.push({ kind: "type", values: [f.type] });
    if (f.surface) eventFilters.push({ kind: "surface", values: [f.surface] });
    if (sessionFilters.length) params.sessionFilters = sessionFilters;
    if (eventFilters.length) params.eventFilters = eventFilters;
    return params;
  }

  async function search(query, f) {
    const my = ++view;
    document.title = query + " · sessionq";
    input.value = query;
    const key = JSON.stringify(searchParams(query, f));
    if (lastSearch && lastSearch.key === key) {
      show(lastSearch.node);
      window.scrollTo(0, lastSearch.scroll);
      onGeneration = lastSearch.refresh;
      return;
    }
    show(el("p", { class: "hint" }, "Searching…"));
    const list = el("div", { class: "hits" });
    const count = el("span", { class: "meta result-count" });
    const footer = el("div", { class: "more-row" });
    const fresh = el("div", { class: "new-matches", role: "status" });
    const node = el("section", { class: "results", "data-query": query, "aria-label": "Search results" },
      filterBar(f, query, true),
      el("div", { class: "results-head" }, el("h2", {}, "Sessions matching “", query, "”"), count), fresh, list, footer);
    let shown = 0;
    const seen = new Set();

    async function loadPage(cursor) {
      const params = Object.assign(searchParams(query, f), { limit: PAGE_SIZE }, cursor ? { cursor } : {});
      const page = await rpc("searchSessions", params);
      for (const hit of page.items) seen.add(hit.header.id);
      const titles = await titlesFor(page.items.map((hit) => hit.header.id));
      if (my !== view && !node.isConnected) return;
      for (const hit of page.items) list.append(hitCard(hit, titles.get(hit.header.id), query));
      shown += page.items.length;
      count.textContent = shown ? plural(shown, "session") + (page.nextCursor ? " so far" : "") : "";
      footer.replaceChildren();
      if (!shown) list.append(el("p", { class: "hint" }, { words: "No session contains all these words.", phrase: "No session contains this phrase.", substring: "No session contains this text." }[searchMode()]));
      if (page.nextCursor) {
        const more = el("button", { class: "more", type: "button" }, "More sessions");
        more.onclick = async () => {
          more.disabled = true;
          more.textContent = "Loading…";
          try { await loadPage(page.nextCursor); } catch (error) { footer.replaceChildren(failure(staleHint(error))); }
        };
        footer.append(more);
      }
    }

    try {
      await loadPage(null);
    } catch (error) {
      if (my === view) show(failure(error));
      return;
    }
    if (my !== view) return;
    // Live: sessions that match now and are not on the page are offered, not pushed in.
    const top = () => rpc("searchSessions", Object.assign(searchParams(query, f), { limit: 100 }));
    const baseline = top().then((page) => { for (const hit of page.items) seen.add(hit.header.id); }).catch(() => {});
    const refresh = async () => {
      await baseline;
      const page = await top();
      const added = page.items.filter((hit) => !seen.has(hit.header.id)).length;
      if (!added) return;
      const again = el("button", { type: "button", class: "primary show-new" }, added + (added === 1 ? " new match" : " new matches") + " — show");
      again.onclick = () => { lastSearch = null; route(); };
      fresh.replaceChildren(again);
    };
    lastSearch = { key, node, scroll: 0, refresh };
    show(node);
    onGeneration = refresh;
  }

  function staleHint(error) {
    if (error.code === "SESSION_QUERY_STALE_CURSOR") return new Error("The index changed since this search started; search again to see the new results.");
    return error;
  }

  function hitCard(hit, title, query) {
    const id = hit.header.id;
    const best = hit.bestMatch;
    const matches = el("div", { class: "matches", hidden: true });
    const others = el("button", { class: "link other-matches", type: "button" }, "Other matches in this session");
    let cursor = null;
    others.onclick = async () => {
      others.disabled = true;
      try {
        const page = await rpc("searchEvents", withMode(cursor ? { sessionId: id, query, limit: EVENT_PAGE, cursor } : { sessionId: id, query, limit: EVENT_PAGE }));
        matches.hidden = false;
        const rows = page.items.filter((item) => cursor !== null || item.seq !== best.seq);
        for (const item of rows) matches.append(matchRow(item, query));
        if (!cursor && !rows.length && !page.nextCursor) matches.append(el("div", { class: "hint" }, "No other matches."));
        cursor = page.nextCursor || null;
        if (cursor) { others.textContent = "More matches in this session"; others.disabled = false; } else others.remove();
      } catch (error) {
        matches.hidden = false;
        matches.append(failure(staleHint(error)));
      }
    };
    return el("article", { class: "hit", "data-session-id": id },
      el("h3", {}, sessionLink(id, title || id, { q: query }, { class: "session-title" }), " ",
        hit.header.origin === "subagent" ? el("span", { class: "badge subagent" }, "subagent") : null),
      headerMeta(hit.header, { q: query }, Boolean(title)),
      matchRow(best, query, "best"),
      matches,
      el("div", {}, others));
  }

  function matchRow(item, query, kind) {
    return el("div", { class: "match" + (kind ? " " + kind : ""), "data-seq": item.seq },
      el("span", { class: "where" },
        el("a", { href: sessionHref(item.sessionId, { q: query, seq: item.seq }), class: "mono" }, "#" + item.seq),
        " ", el("span", { class: "mono" }, item.type), " ", el("span", { class: "badge " + item.surface }, item.surface)),
      el("span", { class: "snippet" }, highlight(item.snippet, query)));
  }

  // ------------------------------------------------------------------ session view

  // The surface fold (format spec §6): which event replaced which.
  function foldSurface(events) {
    const nodes = [];
    const replaced = new Map();   // replacement seq -> [shadowed seqs]
    const replacedBy = new Map(); // shadowed seq -> replacement seq
    for (const event of events) {
      const op = event.surfaceOp;
      if (op === "append") nodes.push(event.seq);
      else if (op && typeof op === "object" && op.op === "replace") {
        const i = nodes.indexOf(op.start);
        const j = nodes.indexOf(op.end);
        if (i < 0 || j < i) continue;
        const gone = nodes.splice(i, j - i + 1, event.seq);
        replaced.set(event.seq, gone);
        for (const seq of gone) replacedBy.set(seq, event.seq);
      }
    }
    return { replaced, replacedBy };
  }

  function eventRow(event, surface, fold, id, query, pairs) {
    const seqRef = (seq) => el("a", { href: sessionHref(id, { q: query, seq }), "data-goto": seq }, "#" + seq);
    const [body, compact] = T.body(event, pairs, seqRef);
    const gone = fold.replaced.get(event.seq);
    const by = fold.replacedBy.get(event.seq);
    const seqLink = (seq) => el("a", { href: sessionHref(id, { q: query, seq }), "data-goto": seq }, "#" + seq);
    const head = el("div", { class: "head" },
      el("a", { class: "seq", href: sessionHref(id, { q: query, seq: event.seq }) }, "#" + event.seq),
      el("span", { class: "type" }, event.type),
      el("span", { class: "badge surface " + surface, title: "surface: " + surface }, surface),
      gone ? el("span", { class: "badge replacement" }, "replaces ", gone.map((s, i) => [i ? ", " : "", seqLink(s)])) : null,
      by !== undefined ? el("span", { class: "badge shadowed replaced-by" }, "replaced by ", seqLink(by)) : null,
      el("span", { class: "time" }, when(event.time)));
    const classes = ["event", surface];
    if (eventFilterMatches(event.type, surface)) classes.push("filter-match");
    if (gone) classes.push("replacement");
    if (compact && surface === "log-only") classes.push("compact");
    return el("div", { class: classes.join(" "), id: "seq-" + event.seq, "data-seq": event.seq, "data-surface": surface, "data-type": event.type },
      head, highlightTree(el("div", { class: "body" }, body), query));
  }

  function lineageTree(trace, titles, currentId, query) {
    const node = (record, isCurrent) => {
      const h = record.header;
      const title = titles.get(h.id);
      return el("div", { class: "node" + (isCurrent ? " current-node" : ""), "data-lineage-id": h.id },
        sessionLink(h.id, title || h.id, { q: query }),
        el("span", { class: "meta" },
          title ? el("code", {}, h.id) : null,
          h.origin ? el("span", {}, h.origin) : null,
          isCurrent ? el("strong", {}, "this session") : null));
    };
    const descend = (children) => {
      if (!children.length) return null;
      return el("ul", {}, children.map((child) => el("li", {}, node(child.session, false), descend(child.descendants))));
    };
    // ancestors run from the parent outward: nest root first
    let inner = el("li", {}, node(trace.target, true), descend(trace.descendants));
    for (const ancestor of trace.ancestors) inner = el("li", {}, node(ancestor, false), el("ul", {}, inner));
    if (trace.complete === false && trace.unresolvedParentId) {
      inner = el("li", {}, el("div", { class: "node" }, el("code", {}, trace.unresolvedParentId), " ", el("span", { class: "meta" }, el("span", {}, "parent not in the index"))), el("ul", {}, inner));
    }
    return el("div", { class: "tree" }, el("ul", {}, inner));
  }

  function flatten(descendants, into) {
    for (const d of descendants) { into.push(d.session.header.id); flatten(d.descendants, into); }
    return into;
  }

  function exportUrl(id, include, redact) {
    let url = "/api/session.export?sessionId=" + encodeURIComponent(id) + "&includeDescendants=" + (include ? "true" : "false");
    if (redact) url += "&redact=all"; // sessionq extension: detected secrets become [REDACTED:…] markers
    if (token) url += "&access_token=" + encodeURIComponent(token);
    return url;
  }

  // The transcript as one self-contained HTML file (log-only events as the page shows them now).
  function htmlExportUrl(id, redact) {
    let showing = false;
    try { showing = localStorage.getItem(LOG_ONLY_KEY) === "1"; } catch (e) { /* storage disabled */ }
    let url = "/api/session.html?sessionId=" + encodeURIComponent(id) + (showing ? "&includeLogOnly=true" : "");
    if (redact) url += "&redact=all";
    if (token) url += "&access_token=" + encodeURIComponent(token);
    return url;
  }

  const EXPORT_ERRORS = { 400: "bad request", 401: "not authorised", 404: "session not found", 500: "the stored log could not be read" };

  async function startExport(url, status, button) {
    button.disabled = true;
    status.className = "export-status meta";
    status.textContent = "Preparing export…";
    try {
      // Preflight like the harness's web client: HEAD answers the status of the GET.
      const check = await fetch(url, { method: "HEAD" });
      await check.arrayBuffer(); // finish the (empty) response before the download starts
      if (!check.ok) throw new Error("Export failed: " + check.status + " " + (EXPORT_ERRORS[check.status] || ""));
      const disposition = check.headers.get("content-disposition") || "";
      const name = (/filename="([^"]+)"/.exec(disposition) || [])[1] || "session.zip";
      const link = el("a", { href: url, download: name, hidden: true });
      document.body.append(link);
      link.click();
      link.remove();
      status.textContent = "Download started: " + name;
    } catch (error) {
      status.className = "export-status error";
      status.textContent = error.message;
    } finally {
      button.disabled = false;
    }
  }

  // "show log-only events": off by default, remembered in localStorage.
  const LOG_ONLY_KEY = "sessionq.showLogOnly";
  // A session view's event filter (type=, surface= in the URL): only matching events show, log-only ones included.
  function eventFilterMatches(type, surface) {
    return (!filters.type || type === filters.type) && (!filters.surface || surface === filters.surface);
  }

  function eventFilters(id, query, seq, events) {
    const active = Boolean(filters.type || filters.surface);
    events.classList.toggle("filtering", active);
    const type = el("input", { id: "event-filter-type", list: "session-event-types", placeholder: "any event type", "aria-label": "event type", value: filters.type || "", size: 16 });
    const surface = el("select", { id: "event-filter-surface", "aria-label": "surface" }, el("option", { value: "" }, "any surface"),
      SURFACES.map((x) => el("option", { value: x, selected: x === filters.surface }, x)));
    const apply = (next) => {
      const params = Object.assign({ session: id, q: query || undefined, seq: seq || undefined }, next);
      location.hash = hashFor(params);
    };
    type.onchange = () => apply({ type: type.value.trim() || undefined, surface: surface.value || undefined });
    surface.onchange = type.onchange;
    const count = el("span", { class: "meta filter-count", role: "status" });
    const clear = active ? el("button", { type: "button", class: "link clear-filters" }, "clear filters") : null;
    if (clear) clear.onclick = () => apply({});
    const recount = () => { count.textContent = active ? plural(events.querySelectorAll(".event.filter-match").length, "matching event") + " shown" : ""; };
    return { recount, node: el("form", { class: "filters event-filters", role: "group", "aria-label": "event filters", onsubmit: (e) => { e.preventDefault(); type.onchange(); } },
      el("label", {}, "Event type ", type, el("datalist", { id: "session-event-types" }, TYPES.map((t) => el("option", { value: t })))),
      el("label", {}, "Surface ", surface), count, clear) };
  }

  function logOnlyToggle(events, filterBox) {
    let on = false;
    try { on = localStorage.getItem(LOG_ONLY_KEY) === "1"; } catch (e) { /* storage disabled */ }
    const box = el("input", { type: "checkbox", id: "show-log-only", checked: on });
    events.classList.toggle("hide-log-only", !on);
    box.onchange = () => {
      events.classList.toggle("hide-log-only", !box.checked);
      try { localStorage.setItem(LOG_ONLY_KEY, box.checked ? "1" : "0"); } catch (e) { /* storage disabled */ }
    };
    return el("div", { class: "toolbar" }, el("h3", {}, "Events"),
      el("label", { class: "legend" }, box, "show log-only events (turn/step markers, streamed chunks)"), filterBox ? filterBox.node : null);
  }

  function divider(event) {
    return event.type === "turn/start" && event.data ? el("div", { class: "turn-divider" }, "Turn " + event.data.turn) : null;
  }

  // The target of a deep link: marked and scrolled to, or a note saying it is not there.
  function goToTarget(id, query, target, total) {
    if (target === null) { window.scrollTo(0, 0); return; }
    const row = document.getElementById("seq-" + target);
    if (row) {
      row.classList.add("target");
      row.classList.remove("log-only-hidden");
      row.scrollIntoView({ block: "center" });
      return;
    }
    const note = el("p", { class: "error deep-link", role: "alert" },
      Number.isInteger(target) && target >= 0 ? "Event #" + target + " is not in this session (it has " + plural(total, "event") + "). "
        : "“" + target + "” is not an event number. ",
      el("a", { href: sessionHref(id, { q: query }) }, "Go to the start of the session"));
    main.prepend(note);
    window.scrollTo(0, 0);
  }

  function notFound(id, error) {
    if (error.code !== "SESSION_QUERY_SESSION_NOT_FOUND") return failure(error);
    return el("div", { class: "not-found" },
      el("p", { class: "error", role: "alert" }, "No session “", id, "” in the index (", el("code", {}, error.code), ")."),
      el("p", {}, el("a", { href: hashFor({}) }, "← All sessions")));
  }

  async function showSession(id, query, seq) {
    const my = ++view;
    if (lastSearch && main.firstChild === lastSearch.node) lastSearch.scroll = window.scrollY;
    input.value = query || "";
    show(el("p", { class: "hint" }, "Loading session…"));
    const target = seq !== undefined && seq !== null && seq !== "" ? (/^\d+$/.test(seq) ? Number(seq) : seq) : null;
    let first, log, records, trace, titles;
    try {
      // A one-event probe tells the length; only a long session is then read in ranges.
      const probe = rpc("readEventRange", { sessionId: id, startSeq: 0, limit: 1 });
      [first, trace] = await Promise.all([probe, rpc("traceSession", { sessionId: id })]);
      titles = await titlesFor([id, ...trace.ancestors.map((a) => a.header.id), ...flatten(trace.descendants, [])]);
      if (first.eventCount > FULL_LIMIT) {
        const start = typeof target === "number" ? Math.max(0, Math.min(target, first.eventCount) - RANGE / 2) : 0;
        first = await rpc("readEventRange", { sessionId: id, startSeq: start, limit: RANGE });
        if (my === view) showLongSession(id, query, target, first, trace, titles);
        return;
      }
      [log, records] = await Promise.all([rpc("readSession", { sessionId: id }), rpc("listEvents", { sessionId: id })]);
    } catch (error) {
      if (my === view) show(notFound(id, error));
      return;
    }
    if (my !== view) return;
    const head = log.session;
    const title = titles.get(id);
    const surfaces = new Map(records.map((r) => [r.seq, r.surface]));
    const fold = foldSurface(log.events);
    const pairs = new T.Pairs();
    for (const event of log.events) pairs.learn(event);
    const counts = { current: 0, shadowed: 0, "log-only": 0 };
    for (const r of records) counts[r.surface] = (counts[r.surface] || 0) + 1;

    const replacements = [...fold.replaced.entries()];
    const eventCount = el("span", { class: "event-count" }, plural(log.events.length, "event"));
    const surfacePanel = el("section", { class: "panel surface-summary", "aria-label": "Surface" },
      el("h3", {}, "Surface"),
      el("div", { class: "meta" },
        eventCount,
        el("span", {}, counts.current + " current"),
        el("span", {}, counts.shadowed + " shadowed"),
        el("span", {}, counts["log-only"] + " log-only"),
        el("span", {}, plural(replacements.length, "replacement"))),
      replacements.length ? el("ul", { class: "replacements" }, replacements.map(([seq, gone]) => {
        const event = log.events[seq];
        return el("li", { "data-replacement": seq },
          el("a", { href: sessionHref(id, { q: query, seq }) }, "#" + seq), " ", el("code", {}, event ? event.type : ""),
          " replaced ", plural(gone.length, "event"), " on the surface: ",
          gone.map((s, i) => [i ? ", " : "", el("a", { href: sessionHref(id, { q: query, seq: s }) }, "#" + s)]));
      })) : null);

    const events = el("section", { class: "events", "aria-label": "Events" });
    const filterBox = eventFilters(id, query, seq, events);
    const toolbar = logOnlyToggle(events, filterBox);

    let rendered = 0;
    const moreEvents = el("div", { class: "more-row" });
    function renderUpTo(limit) {
      const frag = document.createDocumentFragment();
      const stop = Math.min(log.events.length, limit);
      for (; rendered < stop; rendered++) {
        const event = log.events[rendered];
        frag.append(divider(event) || "", eventRow(event, surfaces.get(event.seq) || "log-only", fold, id, query, pairs));
      }
      events.append(frag);
      moreEvents.replaceChildren();
      if (rendered < log.events.length) {
        const b = el("button", { type: "button" }, "Show " + Math.min(RENDER_BATCH, log.events.length - rendered) + " more events (" + (log.events.length - rendered) + " left)");
        b.onclick = () => renderUpTo(rendered + RENDER_BATCH);
        moreEvents.append(b);
      }
      filterBox.recount();
    }
    renderUpTo(Math.max(RENDER_BATCH, typeof target === "number" ? target + 200 : 0));

    show(
      ...sessionHeading(id, query, head, title, trace, titles),
      surfacePanel, toolbar, events, moreEvents);
    goToTarget(id, query, target, log.events.length);

    // Live: newly indexed events are appended (read from where the page is).
    onGeneration = async () => {
      const range = await rpc("readEventRange", { sessionId: id, startSeq: log.events.length, limit: RANGE });
      if (my !== view || !range.events.length) return;
      for (const r of range.records) surfaces.set(r.seq, r.surface);
      const atEnd = rendered === log.events.length;
      for (const event of range.events) {
        if (event.seq !== log.events.length) continue; // already shown
        log.events.push(event);
        pairs.learn(event);
        if (atEnd) {
          const row = eventRow(event, surfaces.get(event.seq) || "log-only", fold, id, query, pairs);
          row.classList.add("arrived");
          events.append(divider(event) || "", row);
          rendered++;
        }
      }
      if (!atEnd) renderUpTo(rendered);
      filterBox.recount();
      eventCount.textContent = plural(range.eventCount, "event");
    };
  }

  // The title, metadata, export controls and lineage of a session view.
  function sessionHeading(id, query, head, title, trace, titles) {
    const descendantCount = new Set(flatten(trace.descendants, [])).size;
    const include = el("input", { type: "checkbox", id: "include-descendants", checked: descendantCount > 0, disabled: descendantCount === 0, hidden: descendantCount === 0 });
    const exportStatus = el("span", { class: "export-status meta", role: "status" });
    const exportButton = el("button", { type: "button", class: "primary export" }, "Export ZIP");
    const redact = el("input", { type: "checkbox", id: "export-redact" });
    exportButton.onclick = () => startExport(exportUrl(id, include.checked, redact.checked), exportStatus, exportButton);
    const htmlButton = el("button", { type: "button", class: "export-html", title: "the transcript as one HTML file that reads offline" }, "Export HTML");
    htmlButton.onclick = () => startExport(htmlExportUrl(id, redact.checked), exportStatus, htmlButton);
    document.title = (title || id) + " · sessionq";
    return [
      query ? el("p", { class: "back" }, el("a", { href: hashFor({ q: query }) }, "← Results for “" + query + "”")) : null,
      el("h2", { class: "session-title" }, title || id),
      headerMeta(head, { q: query }, Boolean(title)),
      el("div", { class: "actions" }, exportButton,
        el("label", { for: "include-descendants" }, include, descendantCount ? " include " + plural(descendantCount, "subagent log") : "no subagent logs"),
        htmlButton,
        el("label", { for: "export-redact", title: "replace detected secrets (keys, tokens, passwords) by [REDACTED:…] markers in both exports" }, redact, " redact secrets"), exportStatus),
      el("section", { class: "panel lineage", "aria-label": "Lineage" }, el("h3", {}, "Lineage"), lineageTree(trace, titles, id, query)),
    ];
  }

  // A long session: events are read in ranges around the target, with the
  // surface facts (shadowed by, replaces) the index keeps for each event.
  function showLongSession(id, query, target, first, trace, titles) {
    const fold = { replaced: new Map(), replacedBy: new Map() };
    const surfaces = new Map();
    function learn(range) {
      for (const r of range.records) {
        surfaces.set(r.seq, r.surface);
        if (r.replacedBy !== undefined && r.replacedBy !== null) fold.replacedBy.set(r.seq, r.replacedBy);
        if (r.replaces) fold.replaced.set(r.seq, r.replaces);
      }
    }
    const pairs = new T.Pairs();
    function rows(range) {
      const frag = document.createDocumentFragment();
      for (const event of range.events) pairs.learn(event);
      for (const event of range.events) frag.append(divider(event) || "", eventRow(event, surfaces.get(event.seq) || "log-only", fold, id, query, pairs));
      return frag;
    }
    let total = first.eventCount;
    let low = first.startSeq;
    let high = first.startSeq + first.events.length;  // exclusive
    learn(first);
    const events = el("section", { class: "events", "aria-label": "Events" });
    const filterBox = eventFilters(id, query, target, events);
    events.append(rows(first));
    const earlier = el("div", { class: "more-row" });
    const later = el("div", { class: "more-row" });
    const shown = el("span", {});
    function controls() {
      filterBox.recount();
      shown.textContent = "showing events " + low + "–" + (high - 1);
      earlier.replaceChildren();
      later.replaceChildren();
      if (low > 0) {
        const b = el("button", { type: "button", class: "load-earlier" }, "Load " + Math.min(RANGE, low) + " earlier events");
        b.onclick = () => load(Math.max(0, low - RANGE), low - Math.max(0, low - RANGE), true, b);
        earlier.append(b);
      }
      if (high < total) {
        const b = el("button", { type: "button", class: "load-later" }, "Load " + Math.min(RANGE, total - high) + " later events (" + (total - high) + " left)");
        b.onclick = () => load(high, RANGE, false, b);
        later.append(b);
      }
    }
    async function load(start, limit, before, button) {
      button.disabled = true;
      try {
        const range = await rpc("readEventRange", { sessionId: id, startSeq: start, limit });
        learn(range);
        if (before) {
          const height = document.documentElement.scrollHeight;
          events.prepend(rows(range));
          window.scrollBy(0, document.documentElement.scrollHeight - height);
          low = range.startSeq;
        } else {
          events.append(rows(range));
          high = range.startSeq + range.events.length;
        }
        controls();
      } catch (error) {
        button.disabled = false;
        button.after(failure(error));
      }
    }
    const toolbar = logOnlyToggle(events, filterBox);
    controls();
    show(
      ...sessionHeading(id, query, first.session, titles.get(id), trace, titles),
      el("section", { class: "panel surface-summary long-log" },
        el("h3", {}, "Surface"),
        el("div", { class: "meta" }, el("span", {}, plural(total, "event")), shown),
        el("p", { class: "hint" }, "A long log: events load in ranges of " + RANGE + "; each shows its surface and the replacements that touch it.")),
      toolbar, earlier, events, later);
    goToTarget(id, query, target, total);
    onGeneration = async () => {  // live: the count moves; later events load on demand
      const probe = await rpc("readEventRange", { sessionId: id, startSeq: 0, limit: 1 });
      if (probe.eventCount !== total) { total = probe.eventCount; controls(); }
    };
  }

  // ------------------------------------------------------------------ routing

  let filters = {};

  function route() {
    const h = parseHash();
    onGeneration = null;
    filters = filtersFrom(h);
    modeSelect.value = MODES.includes(h.mode) ? h.mode : DEFAULT_MODE;
    input.placeholder = PLACEHOLDERS[searchMode()];
    if (h.session) showSession(h.session, h.q || "", h.seq);
    else if (h.q && h.q.trim()) search(h.q.trim(), filters);
    else { input.value = ""; home(filters); }
  }

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const q = input.value.trim();
    if (!q) return;
    lastSearch = null; // an explicit search always asks the server again
    const target = hashFor(Object.assign({ q }, parseHash().session ? {} : filterParams(filters)));
    if (location.hash === target) route(); else location.hash = target;
  });
  window.addEventListener("hashchange", route);
  // A new mode searches again (or re-marks the open session); without a query it waits for one.
  modeSelect.addEventListener("change", () => {
    input.placeholder = PLACEHOLDERS[searchMode()];
    const h = parseHash();
    if (!h.q) return;
    delete h.token;
    delete h.mode;
    lastSearch = null;
    location.hash = hashFor(h);
  });

  // ------------------------------------------------------------------ live updates
  //
  // GET /api/events (server-sent events, read with fetch so the bearer token
  // goes in a header): each new index generation refreshes the header counts
  // and the open view (onGeneration). Reconnects with back-off.

  const liveDot = document.getElementById("live");
  let refreshing = null;
  let again = false;

  async function generationMoved() {
    if (refreshing) { again = true; return; }
    refreshing = (async () => {
      do {
        again = false;
        try { await Promise.all([refreshStatus(), onGeneration ? onGeneration() : null]); } catch (e) { /* the next generation retries */ }
      } while (again);
    })();
    await refreshing;
    refreshing = null;
    document.body.dataset.generationSeen = String(Date.now()); // for tests and screen readers' status
  }

  async function listen() {
    let delay = 1000;
    let last;
    for (;;) {
      try {
        const response = await fetch("/api/events", { headers: token ? { authorization: "Bearer " + token } : {}, cache: "no-store" });
        if (!response.ok || !response.body) throw new Error("HTTP " + response.status);
        liveDot.hidden = false;
        delay = 1000;
        const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
        let buffer = "";
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buffer += value;
          let cut;
          while ((cut = buffer.indexOf("\n\n")) >= 0) {
            const data = buffer.slice(0, cut).split("\n").filter((l) => l.startsWith("data: ")).map((l) => l.slice(6)).join("\n");
            buffer = buffer.slice(cut + 2);
            if (!data) continue;
            const g = JSON.parse(data).generation;
            if (typeof g !== "number") continue;
            if (last !== undefined && g !== last) generationMoved();
            last = g;
          }
        }
      } catch (e) { /* reconnect below */ }
      liveDot.hidden = true;
      await new Promise((resolve) => setTimeout(resolve, delay));
      delay = Math.min(delay * 2, 30000);
    }
  }

  // ------------------------------------------------------------------ keyboard
  //
  // / search · j/k next/previous item · Enter open · Esc back · n/p next/previous match · ? the keys

  const keysDialog = document.getElementById("keys");
  const ITEMS = "main article.hit, main .session-row, main .events .event";

  function visible(node) { return node.offsetParent !== null || node.getClientRects().length > 0; }

  function select(node) {
    for (const old of main.querySelectorAll(".selected")) old.classList.remove("selected");
    node.classList.add("selected");
    node.tabIndex = -1;
    node.focus({ preventScroll: true });
    node.scrollIntoView({ block: "nearest" });
  }

  function move(step) {
    const items = [...main.querySelectorAll(ITEMS)].filter(visible);
    if (!items.length) return;
    const at = items.findIndex((n) => n.classList.contains("selected"));
    select(items[at < 0 ? (step > 0 ? 0 : items.length - 1) : Math.max(0, Math.min(items.length - 1, at + step))]);
  }

  function openSelected() {
    const node = main.querySelector(".selected");
    if (!node) return false;
    const link = node.querySelector("a.session-title");
    if (link) { link.click(); return true; }
    const details = node.querySelector("details");
    if (details) { details.open = !details.open; return true; }
    return false;
  }

  function nextMatch(step) {
    const rows = [...main.querySelectorAll(".events .event")].filter((r) => visible(r) && r.querySelector("mark"));
    if (!rows.length) return;
    const current = main.querySelector(".events .event.selected, .events .event.target");
    let at = current ? rows.indexOf(current) : -1;
    if (at < 0 && current) { // the nearest match after (or before) the current row
      const seq = Number(current.dataset.seq);
      at = step > 0 ? rows.findIndex((r) => Number(r.dataset.seq) > seq) - 1 : rows.findIndex((r) => Number(r.dataset.seq) >= seq);
      if (step < 0 && at < 0) at = rows.length;
    }
    const next = rows[((at + step) % rows.length + rows.length) % rows.length];
    for (const mark of next.querySelectorAll("mark")) for (let d = mark.closest("details"); d; d = d.parentElement.closest("details")) d.open = true;
    select(next);
    next.scrollIntoView({ block: "center" });
  }

  function back() {
    const h = parseHash();
    if (h.session) location.hash = h.q ? hashFor({ q: h.q }) : hashFor({});
    else if (h.q || Object.keys(filterParams(filters)).some((k) => filterParams(filters)[k] !== undefined)) location.hash = hashFor({});
  }

  document.addEventListener("keydown", (event) => {
    if (event.ctrlKey || event.metaKey || event.altKey || event.defaultPrevented) return;
    const target = event.target;
    const typing = /^(INPUT|TEXTAREA|SELECT)$/.test(target.tagName) || target.isContentEditable;
    if (event.key === "Escape") {
      if (keysDialog.open) return; // the dialog closes itself
      if (typing) target.blur(); else back();
      return;
    }
    if (typing) return;
    if (event.key === "Enter" && target.closest && target.closest("a, button, summary")) return; // the focused control's own action
    const actions = {
      "/": () => { input.focus(); input.select(); },
      j: () => move(1), k: () => move(-1),
      n: () => nextMatch(1), p: () => nextMatch(-1),
      Enter: () => openSelected(),
      "?": () => keysDialog.showModal(),
    };
    const action = actions[event.key];
    if (action) { event.preventDefault(); action(); }
  });
  document.getElementById("keys-button").onclick = () => keysDialog.showModal();
  document.getElementById("keys-close").onclick = () => keysDialog.close();

  // ------------------------------------------------------------------ theme
  //
  // auto (prefers-color-scheme) → dark → light, remembered in localStorage.

  const THEME_KEY = "sessionq.theme";
  const themeButton = document.getElementById("theme-toggle");
  function applyTheme(theme) {
    if (theme === "dark" || theme === "light") document.documentElement.dataset.theme = theme;
    else delete document.documentElement.dataset.theme;
    themeButton.textContent = "Theme: " + (theme || "auto");
    themeButton.setAttribute("aria-label", "colour theme: " + (theme || "auto") + " (click to change)");
  }
  let theme = null;
  try { theme = localStorage.getItem(THEME_KEY); } catch (e) { /* storage disabled */ }
  applyTheme(theme);
  themeButton.onclick = () => {
    theme = theme === null || theme === "auto" ? "dark" : theme === "dark" ? "light" : "auto";
    try { localStorage.setItem(THEME_KEY, theme); } catch (e) { /* storage disabled */ }
    applyTheme(theme === "auto" ? null : theme);
  };

  refreshStatus();
  detectModes().then(route);
  listen();
})();
