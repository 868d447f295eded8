// sessionq web page: search, session view, lineage, export. Plain JS, no build.
"use strict";
(function () {
  const main = document.getElementById("main");
  const form = document.getElementById("search-form");
  const input = document.getElementById("q");
  const tokenMatch = /(?:^|[#&])token=([^&]+)/.exec(location.hash);
  const token = tokenMatch ? decodeURIComponent(tokenMatch[1]) : null;

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "class") node.className = v; else node.setAttribute(k, v);
    }
    for (const child of children) node.append(child instanceof Node ? child : String(child));
    return node;
  }

  async function rpc(method, params) {
    const headers = { "content-type": "application/json" };
    if (token) headers.authorization = "Bearer " + token;
    const response = await fetch("/api/rpc/" + method, { method: "POST", headers, body: JSON.stringify(params || {}) });
    const body = await response.json();
    if (!response.ok) throw new Error((body.error && body.error.code) + ": " + (body.error && body.error.message));
    return body;
  }

  function highlight(text, query) {
    const terms = query.split(/\s+/).filter(Boolean).map((t) => t.replace(/["*]/g, "")).filter(Boolean);
    const span = el("span");
    if (!terms.length) { span.append(text); return span; }
    const pattern = new RegExp("(" + terms.map((t) => t.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")).join("|") + ")", "giu");
    let last = 0;
    for (const m of text.matchAll(pattern)) {
      span.append(text.slice(last, m.index), el("mark", {}, m[0]));
      last = m.index + m[0].length;
    }
    span.append(text.slice(last));
    return span;
  }

  function when(ms) { return new Date(ms).toISOString().replace("T", " ").slice(0, 19); }

  function exportUrl(id) {
    let url = "/api/session.export?sessionId=" + encodeURIComponent(id) + "&includeDescendants=true";
    if (token) url += "&access_token=" + encodeURIComponent(token);
    return url;
  }

  function sessionLink(id, label) {
    const keep = token ? "&token=" + encodeURIComponent(token) : "";
    return el("a", { href: "#session=" + encodeURIComponent(id) + keep }, label || id);
  }

  async function search(query, cursor, append) {
    if (!append) main.replaceChildren(el("p", { class: "meta" }, "Searching…"));
    try {
      const page = await rpc("searchSessions", cursor ? { query, limit: 20, cursor } : { query, limit: 20 });
      const ids = page.items.map((hit) => hit.header.id);
      const titles = await Promise.all(ids.map((id) => rpc("readTitle", { sessionId: id }).catch(() => ({}))));
      if (!append) main.replaceChildren();
      const more = main.querySelector(".more");
      if (more) more.remove();
      if (!page.items.length && !append) main.append(el("p", {}, "No matches."));
      page.items.forEach((hit, i) => {
        const title = titles[i] && titles[i].title ? titles[i].title.title : hit.header.id;
        main.append(el("div", { class: "hit" },
          el("h3", {}, sessionLink(hit.header.id, title)),
          el("div", { class: "meta" }, (hit.header.cwd || "(no cwd)") + " · " + when(hit.header.createdAt) +
            " · best match seq " + hit.bestMatch.seq + " (" + hit.bestMatch.type + ", " + hit.bestMatch.surface + ")"),
          el("div", {}, highlight(hit.bestMatch.snippet, query))));
      });
      if (page.nextCursor) {
        const button = el("button", { class: "more" }, "More results");
        button.onclick = () => search(query, page.nextCursor, true);
        main.append(button);
      }
    } catch (error) {
      main.replaceChildren(el("p", { class: "error" }, error.message));
    }
  }

  function lineageTree(nodes, currentId) {
    const list = el("ul");
    for (const node of nodes) {
      const id = node.session.header.id;
      const item = el("li", id === currentId ? { class: "current-node" } : {}, sessionLink(id));
      if (node.descendants.length) item.append(lineageTree(node.descendants, currentId));
      list.append(item);
    }
    return list;
  }

  function eventText(event) {
    const data = event.data || {};
    const blocks = data.content || (data.message && data.message.content) || null;
    if (Array.isArray(blocks)) {
      return blocks.map((b) => b && (b.text || (b.type === "tool-call" ? b.name + " " + b.arguments : b.type === "tool-result" ? JSON.stringify(b.content) : b.type === "image" ? "[image " + (b.attachment && b.attachment.attachmentId) + "]" : ""))).filter(Boolean).join("\n");
    }
    if (event.type === "tool/call") return data.name + " " + data.arguments;
    return JSON.stringify(data).slice(0, 400);
  }

  async function showSession(id) {
    main.replaceChildren(el("p", { class: "meta" }, "Loading…"));
    try {
      const [log, records, trace, title] = await Promise.all([
        rpc("readSession", { sessionId: id }), rpc("listEvents", { sessionId: id }),
        rpc("traceSession", { sessionId: id }), rpc("readTitle", { sessionId: id }),
      ]);
      const surfaces = new Map(records.map((r) => [r.seq, r.surface]));
      const head = log.session;
      main.replaceChildren(
        el("h2", {}, title.title ? title.title.title : id),
        el("div", { class: "meta" }, id + " · " + (head.cwd || "(no cwd)") + " · " + when(head.createdAt)),
        el("p", {}, el("a", { class: "button", href: exportUrl(id), download: "" }, "Export ZIP (with subagents)")));
      const tree = el("div", { class: "tree" }, el("strong", {}, "Lineage"));
      const ancestors = trace.ancestors.slice().reverse();
      if (ancestors.length) tree.append(el("div", { class: "meta" }, "ancestors: "), ...ancestors.flatMap((a) => [sessionLink(a.header.id), " › "]));
      tree.append(lineageTree([{ session: trace.target, descendants: trace.descendants }], id));
      main.append(tree, el("h3", {}, "Events (" + log.events.length + ")"));
      const frag = document.createDocumentFragment();
      for (const event of log.events) {
        const surface = surfaces.get(event.seq) || "log-only";
        const replaces = event.sourceEventSeqs ? " · replaces " + event.sourceEventSeqs.join(", ") : "";
        frag.append(el("div", { class: "event " + surface, id: "seq-" + event.seq },
          el("div", { class: "head" }, "#" + event.seq + " " + event.type + " · " + surface + replaces + " · " + when(event.time)),
          eventText(event)));
      }
      main.append(frag);
    } catch (error) {
      main.replaceChildren(el("p", { class: "error" }, error.message));
    }
  }

  function route() {
    const session = /(?:^|[#&])session=([^&]+)/.exec(location.hash);
    const query = /(?:^|[#&])q=([^&]+)/.exec(location.hash);
    if (session) showSession(decodeURIComponent(session[1]));
    else if (query) { input.value = decodeURIComponent(query[1]); search(input.value, null, false); }
  }

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const q = input.value.trim();
    if (!q) return;
    location.hash = "q=" + encodeURIComponent(q) + (token ? "&token=" + encodeURIComponent(token) : "");
  });
  window.addEventListener("hashchange", route);
  route();
})();
