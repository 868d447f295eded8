// sessionq web page: search grouped by session, session view (events with their
// surface, replacements, lineage), export. Plain JS, no build step.
//
// State lives in the URL fragment: #q=<query>, #session=<id>[&q=<query>][&seq=<n>],
// plus #token=<bearer token> when the server requires one.
"use strict";
(function () {
  const PAGE_SIZE = 20;          // sessions per search page
  const EVENT_PAGE = 5;          // extra matches per session, per click
  const RENDER_BATCH = 2000;     // events rendered before a "show more" button
  // Sessions longer than this are read in ranges (readEventRange) instead of whole.
  const FULL_LIMIT = window.SESSIONQ_FULL_LIMIT || 20000;
  const RANGE = window.SESSIONQ_RANGE || 2000;

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
    if (token) parts.push("token=" + encodeURIComponent(token));
    return "#" + parts.join("&");
  }

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === "class") node.className = v;
      else if (k === "onclick" || k === "onchange") node[k] = v;
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

  function when(ms) {
    if (typeof ms !== "number" || !isFinite(ms)) return "";
    const d = new Date(ms);
    const pad = (n) => String(n).padStart(2, "0");
    return d.getFullYear() + "-" + pad(d.getMonth() + 1) + "-" + pad(d.getDate()) + " " +
      pad(d.getHours()) + ":" + pad(d.getMinutes()) + ":" + pad(d.getSeconds());
  }

  function plural(n, word) { return n + " " + word + (n === 1 ? "" : "s"); }

  // ------------------------------------------------------------------ highlighting
  //
  // A query is one FTS5 phrase over the unicode61 tokenizer: consecutive tokens
  // (letters, numbers, private use), compared case- and diacritic-insensitively.
  // The same rule marks the phrase in snippets and event text.

  const TOKEN = /[\p{L}\p{N}\p{Co}]+/gu;
  function fold(s) { return s.normalize("NFD").replace(/\p{M}/gu, "").toLowerCase(); }
  function tokenize(text) {
    const out = [];
    for (const m of text.matchAll(TOKEN)) out.push({ start: m.index, end: m.index + m[0].length, key: fold(m[0]) });
    return out;
  }

  function matchSpans(text, query) {
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

  async function home() {
    document.title = "sessionq";
    show(el("h2", {}, "Search your agent sessions"),
      el("p", { class: "hint" }, "Type words or a phrase above. Matching is by whole words, in order, ignoring case and accents; ",
        "results are grouped by session, best match first. Open a session to see every event, what the model saw (its surface), ",
        "compactions, the subagent lineage, and to export the raw log."));
  }

  async function refreshStatus() {
    try {
      const s = await rpc("status", {});
      indexStatus.textContent = plural(s.sessions, "session") + " · " + plural(s.events, "event") + " indexed";
    } catch (e) {
      indexStatus.textContent = "";
    }
  }

  async function search(query) {
    const my = ++view;
    document.title = query + " · sessionq";
    input.value = query;
    if (lastSearch && lastSearch.query === query) {
      show(lastSearch.node);
      window.scrollTo(0, lastSearch.scroll);
      return;
    }
    show(el("p", { class: "hint" }, "Searching…"));
    const list = el("div", { class: "hits" });
    const count = el("span", { class: "meta result-count" });
    const footer = el("div", { class: "more-row" });
    const node = el("section", { class: "results", "data-query": query },
      el("div", { class: "results-head" }, el("h2", {}, "Sessions matching “", query, "”"), count), list, footer);
    let shown = 0;

    async function loadPage(cursor) {
      const page = await rpc("searchSessions", cursor ? { query, limit: PAGE_SIZE, cursor } : { query, limit: PAGE_SIZE });
      const titles = await titlesFor(page.items.map((hit) => hit.header.id));
      if (my !== view && !node.isConnected) return;
      for (const hit of page.items) list.append(hitCard(hit, titles.get(hit.header.id), query));
      shown += page.items.length;
      count.textContent = shown ? plural(shown, "session") + (page.nextCursor ? " so far" : "") : "";
      footer.replaceChildren();
      if (!shown) list.append(el("p", { class: "hint" }, "No session contains this phrase."));
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
    lastSearch = { query, node, scroll: 0 };
    show(node);
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
        const page = await rpc("searchEvents", cursor ? { sessionId: id, query, limit: EVENT_PAGE, cursor } : { sessionId: id, query, limit: EVENT_PAGE });
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

  // Tool arguments are a JSON string: show it without \uXXXX escapes when it parses.
  function args(text) {
    if (typeof text !== "string") return text === undefined ? "" : JSON.stringify(text);
    if (!text.includes("\\u")) return text;
    try { return JSON.stringify(JSON.parse(text)); } catch (e) { return text; }
  }

  function blockText(block, out) {
    if (!block || typeof block !== "object") return;
    switch (block.type) {
      case "text": case "reasoning": case "thinking":
        out.push(block.text || "");
        break;
      case "tool-call":
        out.push(el("span", { class: "call" }, "→ " + block.name + " " + args(block.arguments)));
        break;
      case "tool-result": {
        const inner = [];
        for (const b of Array.isArray(block.content) ? block.content : []) blockText(b, inner);
        out.push(el("span", { class: "result" + (block.isError ? " is-error" : "") }, block.isError ? "error: " : "", inner));
        break;
      }
      case "image":
        out.push("[image " + (block.attachment ? block.attachment.attachmentId : "") + "]");
        break;
      default:
        if (typeof block.text === "string") out.push(block.text);
        else out.push(JSON.stringify(block).slice(0, 300));
    }
  }

  function joinLines(parts) {
    const out = [];
    parts.forEach((p, i) => { if (i) out.push("\n"); out.push(p); });
    return out;
  }

  // Returns [parts, compact]: a list of strings/nodes, and whether it fits one line.
  function eventBody(event) {
    const data = event.data && typeof event.data === "object" ? event.data : {};
    const content = Array.isArray(data.content) ? data.content : data.message && Array.isArray(data.message.content) ? data.message.content : null;
    switch (event.type) {
      case "turn/start": return [["turn " + data.turn], true];
      case "turn/end": {
        const r = data.reason || {};
        const why = r.kind + (r.error && r.error.message ? ": " + r.error.message : "");
        return [["turn " + data.turn + " ended (" + why + ")"], true];
      }
      case "step/start": case "step/end": return [["turn " + data.turn + ", step " + data.step], true];
      case "assistant/chunk": {
        const c = data.chunk || {};
        return [[typeof c.text === "string" ? JSON.stringify(c.text) : c.type || ""], true];
      }
      case "session/title": return [["title: " + data.title], true];
      case "tool/call": return [[el("span", { class: "call" }, data.name + " " + args(data.arguments))], false];
      case "compaction/start": case "compaction/end": return [["compaction " + data.compactionId], true];
      case "compaction/summary": {
        const parts = [];
        for (const b of Array.isArray(data.summary) ? data.summary : []) blockText(b, parts);
        const r = data.shadowedRange;
        const note = "summary of " + plural((data.shadowedSeqs || []).length, "event") + (r ? " (#" + r.start + "–#" + r.end + ")" : "") +
          (typeof data.shadowedTokenCount === "number" ? ", " + data.shadowedTokenCount + " tokens" : "");
        return [[note + ": ", ...parts], false];
      }
      case "subagent/descriptor": return [["subagent: " + (data.label || "") + (data.mode ? " (" + data.mode + ")" : "")], true];
      default:
        if (content) {
          const parts = [];
          for (const b of content) blockText(b, parts);
          return [joinLines(parts), false];
        }
        return [[JSON.stringify(data).slice(0, 400)], true];
    }
  }

  function highlightParts(parts, query) {
    if (!query) return parts;
    return parts.map((p) => {
      if (typeof p === "string") return highlight(p, query);
      for (const textNode of [...p.childNodes]) {
        if (textNode.nodeType === Node.TEXT_NODE) textNode.replaceWith(highlight(textNode.textContent, query));
      }
      return p;
    });
  }

  function eventRow(event, surface, fold, id, query) {
    const [parts, compact] = eventBody(event);
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
    if (gone) classes.push("replacement");
    if (compact && surface === "log-only") classes.push("compact");
    return el("div", { class: classes.join(" "), id: "seq-" + event.seq, "data-seq": event.seq, "data-surface": surface, "data-type": event.type },
      head, el("div", { class: "body" }, highlightParts(parts, query)));
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

  function exportUrl(id, include) {
    let url = "/api/session.export?sessionId=" + encodeURIComponent(id) + "&includeDescendants=" + (include ? "true" : "false");
    if (token) url += "&access_token=" + encodeURIComponent(token);
    return url;
  }

  const EXPORT_ERRORS = { 400: "bad request", 401: "not authorised", 404: "session not found", 500: "the stored log could not be read" };

  async function startExport(id, include, status, button) {
    const url = exportUrl(id, include);
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

  async function showSession(id, query, seq) {
    const my = ++view;
    if (lastSearch && main.firstChild === lastSearch.node) lastSearch.scroll = window.scrollY;
    input.value = query || "";
    show(el("p", { class: "hint" }, "Loading session…"));
    const target = seq !== undefined && seq !== null && seq !== "" ? Number(seq) : null;
    let first, log, records, trace, titles;
    try {
      // A one-event probe tells the length; only a long session is then read in ranges.
      const probe = rpc("readEventRange", { sessionId: id, startSeq: 0, limit: 1 });
      [first, trace] = await Promise.all([probe, rpc("traceSession", { sessionId: id })]);
      titles = await titlesFor([id, ...trace.ancestors.map((a) => a.header.id), ...flatten(trace.descendants, [])]);
      if (first.eventCount > FULL_LIMIT) {
        const start = target !== null ? Math.max(0, target - RANGE / 2) : 0;
        first = await rpc("readEventRange", { sessionId: id, startSeq: start, limit: RANGE });
        if (my === view) showLongSession(id, query, target, first, trace, titles);
        return;
      }
      [log, records] = await Promise.all([rpc("readSession", { sessionId: id }), rpc("listEvents", { sessionId: id })]);
    } catch (error) {
      if (my === view) show(failure(error));
      return;
    }
    if (my !== view) return;
    const head = log.session;
    const title = titles.get(id);
    const surfaces = new Map(records.map((r) => [r.seq, r.surface]));
    const fold = foldSurface(log.events);
    const counts = { current: 0, shadowed: 0, "log-only": 0 };
    for (const r of records) counts[r.surface] = (counts[r.surface] || 0) + 1;

    const replacements = [...fold.replaced.entries()];
    const surfacePanel = el("section", { class: "panel surface-summary" },
      el("h3", {}, "Surface"),
      el("div", { class: "meta" },
        el("span", {}, plural(log.events.length, "event")),
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

    const showLogOnly = el("input", { type: "checkbox", id: "show-log-only", checked: true });
    const events = el("section", { class: "events" });
    showLogOnly.onchange = () => events.classList.toggle("hide-log-only", !showLogOnly.checked);

    let rendered = 0;
    const moreEvents = el("div", { class: "more-row" });
    function renderUpTo(limit) {
      const frag = document.createDocumentFragment();
      const stop = Math.min(log.events.length, limit);
      for (; rendered < stop; rendered++) {
        const event = log.events[rendered];
        if (event.type === "turn/start" && event.data) frag.append(el("div", { class: "turn-divider" }, "Turn " + event.data.turn));
        frag.append(eventRow(event, surfaces.get(event.seq) || "log-only", fold, id, query));
      }
      events.append(frag);
      moreEvents.replaceChildren();
      if (rendered < log.events.length) {
        const b = el("button", { type: "button" }, "Show " + Math.min(RENDER_BATCH, log.events.length - rendered) + " more events (" + (log.events.length - rendered) + " left)");
        b.onclick = () => renderUpTo(rendered + RENDER_BATCH);
        moreEvents.append(b);
      }
    }
    renderUpTo(Math.max(RENDER_BATCH, target !== null ? target + 200 : 0));

    show(
      ...sessionHeading(id, query, head, title, trace, titles),
      surfacePanel,
      el("div", { class: "toolbar" }, el("h3", {}, "Events"),
        el("label", { class: "legend" }, showLogOnly, "show log-only events (turn/step markers, streamed chunks)")),
      events, moreEvents);

    if (target !== null) {
      const row = document.getElementById("seq-" + target);
      if (row) { row.classList.add("target"); row.scrollIntoView({ block: "center" }); }
    } else {
      window.scrollTo(0, 0);
    }
  }

  // The title, metadata, export controls and lineage of a session view.
  function sessionHeading(id, query, head, title, trace, titles) {
    const descendantCount = new Set(flatten(trace.descendants, [])).size;
    const include = el("input", { type: "checkbox", id: "include-descendants", checked: descendantCount > 0, disabled: descendantCount === 0, hidden: descendantCount === 0 });
    const exportStatus = el("span", { class: "export-status meta", role: "status" });
    const exportButton = el("button", { type: "button", class: "primary export" }, "Export ZIP");
    exportButton.onclick = () => startExport(id, include.checked, exportStatus, exportButton);
    document.title = (title || id) + " · sessionq";
    return [
      query ? el("p", { class: "back" }, el("a", { href: hashFor({ q: query }) }, "← Results for “" + query + "”")) : null,
      el("h2", { class: "session-title" }, title || id),
      headerMeta(head, { q: query }, Boolean(title)),
      el("div", { class: "actions" }, exportButton,
        el("label", { for: "include-descendants" }, include, descendantCount ? " include " + plural(descendantCount, "subagent log") : "no subagent logs"), exportStatus),
      el("section", { class: "panel lineage" }, el("h3", {}, "Lineage"), lineageTree(trace, titles, id, query)),
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
    function rows(range) {
      const frag = document.createDocumentFragment();
      for (const event of range.events) {
        if (event.type === "turn/start" && event.data) frag.append(el("div", { class: "turn-divider" }, "Turn " + event.data.turn));
        frag.append(eventRow(event, surfaces.get(event.seq) || "log-only", fold, id, query));
      }
      return frag;
    }
    const total = first.eventCount;
    let low = first.startSeq;
    let high = first.startSeq + first.events.length;  // exclusive
    learn(first);
    const events = el("section", { class: "events" });
    events.append(rows(first));
    const earlier = el("div", { class: "more-row" });
    const later = el("div", { class: "more-row" });
    const shown = el("span", {});
    function controls() {
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
    const showLogOnly = el("input", { type: "checkbox", id: "show-log-only", checked: true });
    showLogOnly.onchange = () => events.classList.toggle("hide-log-only", !showLogOnly.checked);
    controls();
    show(
      ...sessionHeading(id, query, first.session, titles.get(id), trace, titles),
      el("section", { class: "panel surface-summary long-log" },
        el("h3", {}, "Surface"),
        el("div", { class: "meta" }, el("span", {}, plural(total, "event")), shown),
        el("p", { class: "hint" }, "A long log: events load in ranges of " + RANGE + "; each shows its surface and the replacements that touch it.")),
      el("div", { class: "toolbar" }, el("h3", {}, "Events"),
        el("label", { class: "legend" }, showLogOnly, "show log-only events (turn/step markers, streamed chunks)")),
      earlier, events, later);
    if (target !== null) {
      const row = document.getElementById("seq-" + target);
      if (row) { row.classList.add("target"); row.scrollIntoView({ block: "center" }); }
    } else {
      window.scrollTo(0, 0);
    }
  }

  // ------------------------------------------------------------------ routing

  function route() {
    const h = parseHash();
    if (h.session) showSession(h.session, h.q || "", h.seq);
    else if (h.q && h.q.trim()) search(h.q.trim());
    else { view++; input.value = ""; home(); }
  }

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const q = input.value.trim();
    if (!q) return;
    lastSearch = null; // an explicit search always asks the server again
    const target = hashFor({ q });
    if (location.hash === target) route(); else location.hash = target;
  });
  window.addEventListener("hashchange", route);
  refreshStatus();
  route();
})();
