"""Accessibility checks run inside a page (Playwright): contrast, labels, landmarks, focus.

Contrast is WCAG 2's: the relative luminance of the text colour and of the
background actually behind the text (the first opaque ``background-color``
up the ancestors, semi-transparent layers blended onto it), ratio
``(L1 + 0.05) / (L2 + 0.05)``.  Body text needs 4.5:1, large text (24 px, or
18.66 px bold) 3:1.  Each visible element that holds text of its own is one
pair; disabled controls are exempt (WCAG 1.4.3).
"""

from __future__ import annotations

from typing import Any

CONTRAST = r"""
() => {
  const parse = (c) => { const m = c.match(/rgba?\(([^)]+)\)/); if (!m) return null; const p = m[1].split(/[ ,\/]+/).filter(Boolean).map(Number); return [p[0], p[1], p[2], p.length > 3 ? p[3] : 1]; };
  const blend = (top, bottom) => { const a = top[3]; return [0, 1, 2].map((i) => top[i] * a + bottom[i] * (1 - a)).concat([1]); };
  const lum = (c) => { const [r, g, b] = c.slice(0, 3).map((v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); }); return 0.2126 * r + 0.7152 * g + 0.0722 * b; };
  const ratio = (a, b) => { const [x, y] = [lum(a), lum(b)].sort((p, q) => q - p); return (x + 0.05) / (y + 0.05); };
  function background(node) {
    const layers = [];
    for (let n = node; n && n.nodeType === 1; n = n.parentElement) {
      const c = parse(getComputedStyle(n).backgroundColor);
      if (c && c[3] > 0) { layers.push(c); if (c[3] >= 1) break; }
    }
    let bg = [255, 255, 255, 1];
    const base = layers.length && layers[layers.length - 1][3] >= 1 ? layers.pop() : null;
    if (base) bg = base;
    for (const layer of layers.reverse()) bg = blend(layer, bg);
    return bg;
  }
  const out = [];
  for (const node of document.querySelectorAll("body *")) {
    if (!node.getClientRects().length || node.closest("[hidden], script, style")) continue;
    const style = getComputedStyle(node);
    if (style.visibility !== "visible" || node.closest(":disabled")) continue;
    const own = [...node.childNodes].filter((t) => t.nodeType === 3 && t.textContent.trim()).map((t) => t.textContent.trim()).join(" ");
    if (!own) continue;
    const fg = parse(style.color);
    const bg = background(node);
    const size = parseFloat(style.fontSize);
    const large = size >= 24 || (size >= 18.66 && Number(style.fontWeight) >= 700);
    const value = ratio(fg[3] < 1 ? blend(fg, bg) : fg, bg);
    out.push({ text: own.slice(0, 40), tag: node.tagName.toLowerCase(), cls: node.className && node.className.baseVal === undefined ? node.className : "",
      color: style.color, background: "rgb(" + bg.slice(0, 3).map(Math.round).join(", ") + ")", ratio: Math.round(value * 100) / 100, needed: large ? 3 : 4.5 });
  }
  return out;
}
"""

UNLABELLED = r"""
() => {
  const named = (n) => {
    if (n.getAttribute("aria-label") || n.getAttribute("aria-labelledby") || n.getAttribute("title")) return true;
    if (["INPUT", "SELECT", "TEXTAREA"].includes(n.tagName)) return Boolean(n.closest("label") || (n.id && document.querySelector(`label[for="${CSS.escape(n.id)}"]`)));
    return Boolean(n.textContent.trim());
  };
  return [...document.querySelectorAll("a[href], button, input, select, textarea, summary")]
    .filter((n) => n.getClientRects().length && n.type !== "hidden" && !named(n))
    .map((n) => n.outerHTML.slice(0, 120));
}
"""

LANDMARKS = r"""
() => ({
  banner: document.querySelectorAll("body > header, [role=banner]").length,
  main: document.querySelectorAll("main, [role=main]").length,
  search: document.querySelectorAll("[role=search], search").length,
  contentinfo: document.querySelectorAll("body > footer, [role=contentinfo]").length,
  regions: [...document.querySelectorAll("section[aria-label], section[aria-labelledby], [role=region]")].map((n) => n.getAttribute("aria-label") || n.getAttribute("aria-labelledby")),
  lang: document.documentElement.lang,
  title: document.title,
})
"""

FOCUS_RING = r"""
() => {
  const n = document.activeElement;
  if (!n || n === document.body) return null;
  if (!n.matches(":focus")) return { tag: n.tagName.toLowerCase(), id: n.id, inner: true, outline: true, shadow: "none" }; // a part of a native control (a date field's calendar button) has the focus and the browser rings it
  const s = getComputedStyle(n);
  return { tag: n.tagName.toLowerCase(), id: n.id, outline: s.outlineStyle !== "none" && parseFloat(s.outlineWidth) >= 1, width: s.outlineWidth, color: s.outlineColor, shadow: s.boxShadow };
}
"""


def contrast_pairs(page: Any) -> list[dict[str, Any]]:
    """Every visible text/background pair of ``page`` with its WCAG ratio and the ratio it needs."""
    return page.evaluate(CONTRAST)  # type: ignore[no-any-return]


def low_contrast(page: Any) -> list[dict[str, Any]]:
    """The pairs of ``page`` below the ratio they need (one entry per distinct pair)."""
    seen: dict[tuple[str, str, str], dict[str, Any]] = {}
    for pair in contrast_pairs(page):
        if pair["ratio"] < pair["needed"]:
            seen.setdefault((pair["color"], pair["background"], pair["cls"]), pair)
    return list(seen.values())


def unlabelled_controls(page: Any) -> list[str]:
    """Visible links, buttons and form controls with no accessible name."""
    return page.evaluate(UNLABELLED)  # type: ignore[no-any-return]


def landmarks(page: Any) -> dict[str, Any]:
    return page.evaluate(LANDMARKS)  # type: ignore[no-any-return]


def focus_ring(page: Any) -> dict[str, Any] | None:
    """The focused element and whether it draws a visible outline."""
    return page.evaluate(FOCUS_RING)  # type: ignore[no-any-return]
