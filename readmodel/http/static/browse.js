// sessionq web page: the landing page — workspaces (cwd) and their sessions,
// newest first, paged by the listSessionSummaries cursor; subagent children
// nested under their parent. `ctx` carries the page's helpers (app.js).
"use strict";
(function () {
  const EAGER = 3;        // workspaces whose first page loads at once
  const PAGE = 10;        // sessions per page on the landing page
  const PAGE_ONE = 50;    // sessions per page when one workspace is chosen

  // `filters`: {ws?: cwd, nocwd?: true, from?: ms, to?: ms}; returns the view's node and its live refresh.
  function browse(ctx, filters) {
    const { el, rpc, when, plural, failure, hashFor, sessionHref } = ctx;
    const root = el("section", { class: "browse", "aria-label": "Sessions by workspace" });
    const sections = [];

    function range(params) {
      if (filters.from !== undefined) params.createdFrom = filters.from;
      if (filters.to !== undefined) params.createdTo = filters.to;
      return params;
    }

    function sessionRow(item) {
      const li = el("li", { class: "session-row", "data-session-id": item.id, "data-selectable": "" },
        el("div", { class: "row-main" },
          el("a", { class: "session-title", href: sessionHref(item.id) }, item.title || item.id),
          item.parentSession ? el("span", { class: "badge subagent" }, "subagent") : null,
          item.status && item.status !== "ok" ? el("span", { class: "badge error-badge", title: item.status }, "unreadable") : null),
        el("div", { class: "meta" },
          el("span", { class: "created", title: "created" }, "created ", when(item.createdAt)),
          el("span", { class: "last-activity", title: "last activity" }, "last activity ", when(item.lastActivity)),
          el("span", { class: "event-count" }, plural(item.eventCount, "event")),
          item.title ? el("code", { class: "sid" }, item.id) : null));
      return li;
    }

    // One page of summaries as a list: children under their parent when both are on the page.
    function rows(items) {
      const byId = new Map();
      const frag = document.createDocumentFragment();
      for (const item of items) byId.set(item.id, sessionRow(item));
      for (const item of items) {
        const li = byId.get(item.id);
        const parent = item.parentSession && byId.get(item.parentSession);
        if (parent && parent !== li) {
          let list = parent.querySelector(":scope > ul.children");
          if (!list) { list = el("ul", { class: "children", "aria-label": "subagent sessions" }); parent.append(list); }
          list.prepend(li); // listing order is newest first: children read oldest first under the parent
        } else {
          if (item.parentSession) li.querySelector(".meta").append(el("span", {}, "child of ", el("a", { href: sessionHref(item.parentSession) }, item.parentSession)));
          frag.append(li);
        }
      }
      return frag;
    }

    function section(ws, eager, pageSize) {
      const list = el("ul", { class: "session-list" });
      const footer = el("div", { class: "more-row" });
      const head = el("span", { class: "meta ws-meta" });
      const label = ws.cwd === null ? "(no workspace)" : ws.cwd;
      const href = hashFor(ws.cwd === null ? { nocwd: 1 } : { ws: ws.cwd });
      const node = el("section", { class: "workspace", "data-cwd": ws.cwd === null ? "" : ws.cwd },
        el("h3", {}, el("a", { class: "ws-link", href }, el("code", { class: "cwd" }, label)), " ", head), list, footer);
      const state = { ws, pages: 0, node };
      function describe() {
        head.replaceChildren(el("span", {}, plural(state.ws.sessionCount, "session")),
          el("span", {}, "last activity ", when(state.ws.lastActivity)));
      }
      async function load(cursor) {
        const params = range({ cwd: ws.cwd, limit: pageSize });
        if (cursor) params.cursor = cursor;
        const page = await rpc("listSessionSummaries", params);
        if (!cursor) list.replaceChildren();
        list.append(rows(page.items));
        if (!cursor && !page.items.length) list.append(el("li", { class: "hint" }, "No sessions in this range."));
        state.pages = cursor ? state.pages + 1 : 1;
        footer.replaceChildren();
        if (page.nextCursor) {
          const more = el("button", { type: "button", class: "more" }, "More sessions in ", label);
          more.onclick = async () => {
            more.disabled = true;
            try { await load(page.nextCursor); } catch (error) { footer.replaceChildren(failure(ctx.staleHint(error))); }
          };
          footer.append(more);
        }
      }
      state.load = load;
      state.describe = describe;
      describe();
      if (eager) load(null).catch((error) => footer.replaceChildren(failure(error)));
      else {
        const open = el("button", { type: "button", class: "open-ws" }, "Show sessions");
        open.onclick = () => { open.disabled = true; load(null).catch((error) => footer.replaceChildren(failure(error))); };
        footer.append(open);
      }
      sections.push(state);
      return node;
    }

    async function render() {
      const workspaces = await rpc("listWorkspaces", {});
      const chosen = filters.nocwd ? workspaces.filter((w) => w.cwd === null)
        : filters.ws !== undefined ? workspaces.filter((w) => w.cwd === filters.ws) : workspaces;
      const total = workspaces.reduce((n, w) => n + w.sessionCount, 0);
      root.replaceChildren(
        el("div", { class: "results-head" }, el("h2", {}, filters.ws !== undefined || filters.nocwd ? "Workspace" : "Sessions by workspace"),
          el("span", { class: "meta browse-count" }, plural(total, "session") + " in " + plural(workspaces.length, "workspace"))));
      if (filters.ws !== undefined || filters.nocwd) root.append(el("p", { class: "back" }, el("a", { href: hashFor({}) }, "← All workspaces")));
      if (!chosen.length) {
        root.append(el("p", { class: "hint empty" }, workspaces.length ? "No sessions in this workspace." : "The index holds no sessions yet. Run `sessionq index` (or the daemon) over your session logs."));
        return;
      }
      const single = chosen.length === 1 && (filters.ws !== undefined || filters.nocwd);
      chosen.forEach((ws, i) => root.append(section(ws, single || i < EAGER, single ? PAGE_ONE : PAGE)));
    }

    // Live: new counts for every workspace; first pages reloaded where nobody paged on.
    async function refresh() {
      const workspaces = await rpc("listWorkspaces", {});
      const known = new Map(sections.map((s) => [s.ws.cwd, s]));
      if (workspaces.some((w) => !known.has(w.cwd)) && filters.ws === undefined && !filters.nocwd) { sections.length = 0; await render(); return; }
      const total = workspaces.reduce((n, w) => n + w.sessionCount, 0);
      const count = root.querySelector(".browse-count");
      if (count) count.textContent = plural(total, "session") + " in " + plural(workspaces.length, "workspace");
      for (const w of workspaces) {
        const s = known.get(w.cwd);
        if (!s) continue;
        s.ws = w;
        s.describe();
        if (s.pages === 1) await s.load(null);
      }
    }

    return { node: root, ready: render(), refresh };
  }

  window.SessionqBrowse = browse;
})();
