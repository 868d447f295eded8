// sessionq web page: one event's body as people read it — messages as markdown
// (markdown.js), tool calls paired with their results (collapsible), reasoning
// collapsed, long outputs cut with "show all N characters".
"use strict";
(function () {
  const MD = window.SessionqMarkdown;
  const LONG = window.SESSIONQ_LONG_TEXT || 4000; // characters shown before "show all"

  function el(tag, cls, ...children) {
    const n = document.createElement(tag);
    if (cls) n.className = cls;
    for (const c of children.flat(Infinity)) if (c !== null && c !== undefined && c !== false) n.append(c instanceof Node ? c : String(c));
    return n;
  }

  // Tool calls and results of a session, by call id (grows as events load or arrive).
  function Pairs() { this.calls = new Map(); this.results = new Map(); this.waiting = new Map(); }
  Pairs.prototype.learn = function (event) {
    for (const block of contentOf(event) || []) {
      if (!block || typeof block !== "object") continue;
      if (block.type === "tool-call" && block.id) this.calls.set(block.id, { seq: event.seq, name: block.name });
      if (block.type === "tool-result" && block.toolCallId) {
        this.results.set(block.toolCallId, { seq: event.seq, block });
        const fill = this.waiting.get(block.toolCallId);
        if (fill) { this.waiting.delete(block.toolCallId); fill(); }
      }
    }
  };

  function contentOf(event) {
    const data = event.data && typeof event.data === "object" ? event.data : {};
    if (Array.isArray(data.content)) return data.content;
    if (data.message && Array.isArray(data.message.content)) return data.message.content;
    return null;
  }

  // Text (markdown or verbatim), cut at LONG characters with a button for the rest.
  function text(value, markdown) {
    const full = String(value);
    const box = el("div", markdown ? "md" : "plain");
    const draw = (t) => { box.replaceChildren(markdown ? MD.render(t) : el("pre", "output", el("code", null, t))); };
    if (full.length <= LONG) { draw(full); return box; }
    draw(full.slice(0, LONG));
    const more = el("button", "link show-all", "show all " + full.length.toLocaleString("en") + " characters");
    more.type = "button";
    more.onclick = () => { draw(full); more.remove(); box.dispatchEvent(new CustomEvent("sq-expanded", { bubbles: true })); };
    const wrap = el("div", "long-text", box, more);
    wrap.dataset.length = full.length;
    return wrap;
  }

  function pretty(args) {
    if (typeof args !== "string") return JSON.stringify(args, null, 2) || "";
    try { return JSON.stringify(JSON.parse(args), null, 2); } catch (e) { return args; }
  }

  function brief(args) {
    let s = typeof args === "string" ? args : JSON.stringify(args) || "";
    try { s = JSON.stringify(JSON.parse(s)); } catch (e) { /* as is */ }
    return s.length > 120 ? s.slice(0, 117) + "…" : s;
  }

  function resultBody(block) {
    const parts = [];
    for (const b of Array.isArray(block.content) ? block.content : []) {
      if (b && typeof b.text === "string") parts.push(text(b.text, false));
      else if (b && b.type === "image") parts.push(el("span", "meta", "[image " + (b.attachment ? b.attachment.attachmentId : "") + "]"));
      else parts.push(text(JSON.stringify(b), false));
    }
    return parts.length ? parts : [el("span", "meta", "(empty result)")];
  }

  function chars(block) {
    let n = 0;
    for (const b of Array.isArray(block.content) ? block.content : []) if (b && typeof b.text === "string") n += b.text.length;
    return n;
  }

  function toolCall(block, pairs, link) {
    const details = el("details", "tool-call");
    details.dataset.callId = block.id || "";
    const status = el("span", "tool-status meta");
    const output = el("div", "tool-output");
    details.append(el("summary", null, el("span", "tool-name", block.name || "tool"), " ", el("code", "tool-args", brief(block.arguments)), " ", status),
      el("pre", "args", el("code", null, pretty(block.arguments))), output);
    const fill = () => {
      const result = pairs.results.get(block.id);
      if (!result) { status.textContent = "· no result yet"; return; }
      status.replaceChildren("· result ", link(result.seq), result.block.isError ? el("span", "badge error-badge", "error") : "");
      output.replaceChildren(el("div", "meta", "result:"), ...resultBody(result.block));
      output.classList.toggle("is-error", Boolean(result.block.isError));
    };
    if (block.id && !pairs.results.has(block.id)) pairs.waiting.set(block.id, fill);
    fill();
    return details;
  }

  function toolResult(block, pairs, link) {
    const call = pairs.calls.get(block.toolCallId);
    const details = el("details", "tool-result" + (block.isError ? " is-error" : ""));
    details.append(el("summary", null, block.isError ? el("span", "badge error-badge", "error") : "", " result of ",
      el("span", "tool-name", call ? call.name : "tool call"), call ? [" ", link(call.seq)] : "",
      el("span", "meta", " · " + chars(block).toLocaleString("en") + " characters")), ...resultBody(block));
    return details;
  }

  function block(b, pairs, link) {
    if (!b || typeof b !== "object") return null;
    switch (b.type) {
      case "text": return text(b.text || "", true);
      case "reasoning": case "thinking": {
        const t = b.text || "";
        return el("details", "reasoning", el("summary", null, "Reasoning", el("span", "meta", " · " + t.length.toLocaleString("en") + " characters")), text(t, true));
      }
      case "tool-call": return toolCall(b, pairs, link);
      case "tool-result": return toolResult(b, pairs, link);
      case "image": return el("span", "meta", "[image " + (b.attachment ? b.attachment.attachmentId : "") + "]");
      default: return typeof b.text === "string" ? text(b.text, true) : text(JSON.stringify(b), false);
    }
  }

  function plural(n, word) { return n + " " + word + (n === 1 ? "" : "s"); }

  // [node, compact]: the body of `event`; compact means it fits one line.
  function body(event, pairs, link) {
    const data = event.data && typeof event.data === "object" ? event.data : {};
    const line = (s) => [el("span", "line", s), true];
    switch (event.type) {
      case "turn/start": return line("turn " + data.turn);
      case "turn/end": {
        const r = data.reason || {};
        return line("turn " + data.turn + " ended (" + r.kind + (r.error && r.error.message ? ": " + r.error.message : "") + ")");
      }
      case "step/start": case "step/end": return line("turn " + data.turn + ", step " + data.step);
      case "assistant/chunk": {
        const c = data.chunk || {};
        return line(typeof c.text === "string" ? JSON.stringify(c.text) : c.type || "");
      }
      case "session/title": return line("title: " + data.title);
      case "tool/call": return [el("span", "call", "→ " + data.name + " " + brief(data.arguments)), true];
      case "compaction/start": case "compaction/end": return line("compaction " + data.compactionId);
      case "compaction/summary": {
        const r = data.shadowedRange;
        const note = "summary of " + plural((data.shadowedSeqs || []).length, "event") + (r ? " (#" + r.start + "–#" + r.end + ")" : "") +
          (typeof data.shadowedTokenCount === "number" ? ", " + data.shadowedTokenCount + " tokens" : "");
        return [el("div", "message", el("div", "meta", note), (Array.isArray(data.summary) ? data.summary : []).map((b) => block(b, pairs, link))), false];
      }
      case "subagent/descriptor": return line("subagent: " + (data.label || "") + (data.mode ? " (" + data.mode + ")" : ""));
      default: {
        const content = contentOf(event);
        if (content) return [el("div", "message", content.map((b) => block(b, pairs, link))), false];
        return [text(JSON.stringify(data), false), true];
      }
    }
  }

  window.SessionqTranscript = { Pairs, body, LONG };
})();
