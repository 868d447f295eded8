// A small, safe markdown renderer for transcripts (sessionq's own; no HTML ever parsed).
//
// Safety by construction: the output is built with createElement/textContent
// only, so markup in a message (<script>, <img onerror>, …) stays text. The
// subset: paragraphs (a single newline is a line break), ATX headings, fenced
// and indented code blocks as <pre><code>, bullet and numbered lists, block
// quotes, `code spans`, **strong**, *emphasis* / _emphasis_, and
// [links](url) whose url is http(s) — any other scheme (javascript:, data:, …)
// renders as plain text.
"use strict";
(function () {
  const SAFE_URL = /^https?:\/\/[^\s<>"]+$/i;

  function node(tag, cls) {
    const n = document.createElement(tag);
    if (cls) n.className = cls;
    return n;
  }

  // Inline markup of one line of text, appended to `parent`.
  function inline(text, parent) {
    // code spans first: nothing inside them is markup
    const pattern = /(`+)([\s\S]*?[^`])\1(?!`)|\*\*([^*\n]+?)\*\*|(?<![\p{L}\p{N}_])__([^_\n]+?)__(?![\p{L}\p{N}_])|\*([^*\s][^*\n]*?)\*|(?<![\p{L}\p{N}_])_([^_\s][^_\n]*?)_(?![\p{L}\p{N}_])|\[([^\]\n]+)\]\(([^)\s]+)\)/gu;
    let last = 0;
    for (const m of text.matchAll(pattern)) {
      if (m.index > last) parent.append(text.slice(last, m.index));
      last = m.index + m[0].length;
      if (m[2] !== undefined) {
        const c = node("code");
        c.textContent = m[2].length > 2 && m[2].startsWith(" ") && m[2].endsWith(" ") ? m[2].slice(1, -1) : m[2];
        parent.append(c);
      } else if (m[3] !== undefined || m[4] !== undefined) {
        const s = node("strong");
        inline(m[3] !== undefined ? m[3] : m[4], s);
        parent.append(s);
      } else if (m[5] !== undefined || m[6] !== undefined) {
        const e = node("em");
        inline(m[5] !== undefined ? m[5] : m[6], e);
        parent.append(e);
      } else {
        const url = m[8];
        if (SAFE_URL.test(url)) {
          const a = node("a");
          a.href = url;
          a.rel = "noopener noreferrer nofollow";
          a.target = "_blank";
          inline(m[7], a);
          parent.append(a);
        } else {
          parent.append(m[0]); // an unsafe scheme: the source text, inert
        }
      }
    }
    if (last < text.length) parent.append(text.slice(last));
  }

  function lines(parent, texts) {
    texts.forEach((t, i) => {
      if (i) parent.append(node("br"));
      inline(t, parent);
    });
  }

  const FENCE = /^ {0,3}(```+|~~~+)\s*([\w+.#-]*)\s*$/;
  const HEADING = /^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$/;
  const BULLET = /^ {0,3}[-*+]\s+(.*)$/;
  const NUMBERED = /^ {0,3}(\d{1,9})[.)]\s+(.*)$/;
  const QUOTE = /^ {0,3}>\s?(.*)$/;
  const INDENTED = /^( {4}|\t)(.*)$/;

  // Block structure: returns a DocumentFragment.
  function render(text) {
    const out = document.createDocumentFragment();
    const src = String(text).replace(/\r\n?/g, "\n").split("\n");
    let i = 0;
    while (i < src.length) {
      const line = src[i];
      if (!line.trim()) { i++; continue; }
      let m;
      if ((m = FENCE.exec(line))) {
        const close = m[1];
        const body = [];
        i++;
        while (i < src.length && !(src[i].trim().startsWith(close[0].repeat(3)) && src[i].trim().replace(/[`~]/g, "") === "")) body.push(src[i++]);
        i++; // the closing fence (or the end)
        const pre = node("pre");
        const code = node("code");
        if (m[2]) code.dataset.lang = m[2];
        code.textContent = body.join("\n");
        pre.append(code);
        out.append(pre);
      } else if ((m = HEADING.exec(line))) {
        const h = node("p", "md-heading md-h" + m[1].length);
        const s = node("strong");
        inline(m[2], s);
        h.append(s);
        out.append(h);
        i++;
      } else if (BULLET.test(line) || NUMBERED.test(line)) {
        const numbered = !BULLET.test(line);
        const list = node(numbered ? "ol" : "ul");
        if (numbered) { const start = Number(NUMBERED.exec(line)[1]); if (start !== 1) list.start = start; }
        const re = numbered ? NUMBERED : BULLET;
        let item = null;
        while (i < src.length && src[i].trim()) {
          const lm = re.exec(src[i]);
          if (lm) {
            item = node("li");
            inline(numbered ? lm[2] : lm[1], item);
            list.append(item);
          } else if (/^\s+\S/.test(src[i]) && item) {
            item.append(node("br"));
            inline(src[i].trim(), item);
          } else break;
          i++;
        }
        out.append(list);
      } else if (QUOTE.test(line)) {
        const body = [];
        while (i < src.length && (m = QUOTE.exec(src[i]))) { body.push(m[1]); i++; }
        const q = node("blockquote");
        q.append(render(body.join("\n")));
        out.append(q);
      } else if (INDENTED.test(line)) {
        const body = [];
        while (i < src.length && (INDENTED.test(src[i]) || (!src[i].trim() && i + 1 < src.length && INDENTED.test(src[i + 1])))) {
          body.push(src[i].replace(/^( {4}|\t)/, ""));
          i++;
        }
        const pre = node("pre");
        const code = node("code");
        code.textContent = body.join("\n");
        pre.append(code);
        out.append(pre);
      } else {
        const body = [];
        while (i < src.length && src[i].trim() && !FENCE.test(src[i]) && !HEADING.test(src[i]) && !QUOTE.test(src[i]) &&
               !(body.length && (BULLET.test(src[i]) || NUMBERED.test(src[i])))) body.push(src[i++]);
        const p = node("p");
        lines(p, body);
        out.append(p);
      }
    }
    return out;
  }

  window.SessionqMarkdown = { render, inline, SAFE_URL };
})();
