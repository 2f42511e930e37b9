// Markdown → Preact vnodes, for the model's text.
//
// The text is hostile: it is never turned into HTML. Every piece becomes a vnode, and Preact sets text
// as text nodes, so `<img onerror=…>` in a reply shows as those characters. A link is made only for an
// http(s) or mailto URL (parsed the way the browser will parse it), so `javascript:` and `data:` never
// reach an href; images are shown as links, never loaded. It reads what models write — headings,
// paragraphs, lists (nested), fenced code, block quotes, tables, rules; code spans, emphasis, links —
// and renders a half-written reply (an unclosed fence, a dangling `**`) as sensibly as it can, since
// it runs again on every streamed piece.

import { h } from "../vendor/preact.mjs";

const FENCE = /^ {0,3}(`{3,}|~{3,})\s*([^`\s]*)[^`]*$/;
const HEADING = /^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$/;
const RULE = /^ {0,3}([-*_])(\s*\1){2,}\s*$/;
const QUOTE = /^ {0,3}>\s?/;
const ITEM = /^( *)([-*+]|\d{1,9}[.)])(\s+|$)/;
const TABLE_RULE = /^\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$/;

/** The vnodes of `text` rendered as Markdown. */
export function markdown(text) {
  return blocks(String(text ?? "").replace(/\r\n?/g, "\n").split("\n"));
}

/** A URL safe to link to, or null: only http, https and mailto. */
export function safeUrl(raw) {
  try {
    const url = new URL(String(raw).trim(), "http://invalid.example/");
    if (url.origin === "http://invalid.example") return null; // relative: nothing to go to
    return ["http:", "https:", "mailto:"].includes(url.protocol) ? url.href : null;
  } catch {
    return null;
  }
}

function blocks(lines) {
  const out = [];
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    if (!line.trim()) { i++; continue; }
    let m;
    if ((m = FENCE.exec(line))) {
      const close = new RegExp(`^ {0,3}${m[1][0]}{${m[1].length},}\\s*$`);
      const body = [];
      for (i++; i < lines.length && !close.test(lines[i]); i++) body.push(lines[i]);
      i++;
      out.push(h("pre", { class: "code" }, h("code", { "data-lang": m[2] || undefined }, body.join("\n"))));
    } else if ((m = HEADING.exec(line))) {
      out.push(h(`h${Math.min(m[1].length + 2, 6)}`, null, inline(m[2])));
      i++;
    } else if (RULE.test(line)) {
      out.push(h("hr", null));
      i++;
    } else if (QUOTE.test(line)) {
      const body = [];
      for (; i < lines.length && lines[i].trim() && QUOTE.test(lines[i]); i++) body.push(lines[i].replace(QUOTE, ""));
      out.push(h("blockquote", null, blocks(body)));
    } else if ((m = ITEM.exec(line))) {
      i = list(lines, i, out);
    } else if (line.includes("|") && i + 1 < lines.length && TABLE_RULE.test(lines[i + 1]) && lines[i + 1].includes("-")) {
      i = table(lines, i, out);
    } else {
      const body = [];
      for (; i < lines.length && lines[i].trim() && !startsBlock(lines, i); i++) body.push(lines[i].trim());
      out.push(h("p", null, inlineLines(body)));
    }
  }
  return out;
}

function startsBlock(lines, i) {
  const line = lines[i];
  return FENCE.test(line) || HEADING.test(line) || RULE.test(line) || QUOTE.test(line) || ITEM.test(line);
}

/** One list from line `i` (its items' own lines and the indented ones under them); the next line's index. */
function list(lines, i, out) {
  const first = ITEM.exec(lines[i]);
  const indent = first[1].length;
  const ordered = /\d/.test(first[2]);
  const items = [];
  while (i < lines.length) {
    const m = ITEM.exec(lines[i]);
    if (!m || m[1].length !== indent || /\d/.test(m[2]) !== ordered) break;
    const width = m[0].length;
    const body = [lines[i].slice(width)];
    for (i++; i < lines.length; i++) {
      const next = lines[i];
      if (!next.trim()) {
        const after = lines[i + 1];
        if (after !== undefined && after.trim() && leading(after) > indent) { body.push(""); continue; }
        break;
      }
      const sub = ITEM.exec(next);
      if (sub && sub[1].length <= indent) break;
      if (!sub && leading(next) <= indent && startsBlock(lines, i)) break;
      body.push(next.slice(Math.min(leading(next), width)));
    }
    items.push(body);
  }
  const start = ordered ? parseInt(first[2], 10) : undefined;
  out.push(h(ordered ? "ol" : "ul", start > 1 ? { start } : null, items.map((body) => {
    const inner = blocks(body);
    // a tight item's paragraph shows as plain text, as in every Markdown renderer
    return h("li", null, inner.length && inner[0].type === "p" && !body.includes("") ? [inner[0].props.children, ...inner.slice(1)] : inner);
  })));
  while (i < lines.length && !lines[i].trim()) i++;
  return i;
}

function leading(line) {
  return line.length - line.trimStart().length;
}

function table(lines, i, out) {
  const cells = (line) => line.trim().replace(/^\|/, "").replace(/\|$/, "").split(/(?<!\\)\|/).map((c) => c.trim());
  const head = cells(lines[i]);
  const aligns = cells(lines[i + 1]).map((c) => (c.endsWith(":") ? (c.startsWith(":") ? "center" : "right") : null));
  const rows = [];
  for (i += 2; i < lines.length && lines[i].includes("|") && lines[i].trim(); i++) rows.push(cells(lines[i]));
  const cell = (tag, text, n) => h(tag, aligns[n] ? { class: `align-${aligns[n]}` } : null, inline(text));
  out.push(h("div", { class: "table" }, h("table", null,
    h("thead", null, h("tr", null, head.map((c, n) => cell("th", c, n)))),
    h("tbody", null, rows.map((r) => h("tr", null, head.map((_, n) => cell("td", r[n] ?? "", n))))))));
  return i;
}

function inlineLines(lines) {
  const out = [];
  lines.forEach((line, n) => {
    if (n) out.push(h("br", null));
    out.push(...inline(line.replace(/\\$/, "")));
  });
  return out;
}

const URL_START = /https?:\/\/[^\s<>"'`]+/y;
const PUNCT = /[!-/:-@[-`{-~]/;

/** Inline Markdown: code spans, links, autolinks, bare URLs, strong, emphasis, strikethrough, escapes. */
function inline(text) {
  const out = [];
  let buf = "";
  const flush = () => { if (buf) { out.push(buf); buf = ""; } };
  for (let i = 0; i < text.length;) {
    const c = text[i];
    if (c === "\\" && PUNCT.test(text[i + 1] || "")) { buf += text[i + 1]; i += 2; continue; }
    if (c === "`") {
      const run = /^`+/.exec(text.slice(i))[0];
      const end = text.indexOf(run, i + run.length);
      if (end > 0) {
        flush();
        out.push(h("code", null, text.slice(i + run.length, end).replace(/^ (.*) $/, "$1")));
        i = end + run.length;
        continue;
      }
      buf += run; i += run.length; continue;
    }
    if (c === "[" || (c === "!" && text[i + 1] === "[")) {
      const link = parseLink(text, c === "!" ? i + 1 : i);
      if (link) {
        flush();
        const label = c === "!" ? [link.label || "image"] : inline(link.label);
        out.push(anchor(link.url, label));
        i = link.end;
        continue;
      }
    }
    if (c === "<") {
      const m = /^<((?:https?|mailto):[^\s<>]+)>/.exec(text.slice(i));
      if (m) { flush(); out.push(anchor(m[1], [m[1]])); i += m[0].length; continue; }
    }
    if (c === "h" && (i === 0 || /[\s(]/.test(text[i - 1]))) {
      URL_START.lastIndex = i;
      const m = URL_START.exec(text);
      if (m) {
        const url = m[0].replace(/[.,;:!?)]+$/, "");
        flush(); out.push(anchor(url, [url])); i += url.length; continue;
      }
    }
    if (c === "*" || c === "_" || c === "~") {
      const span = emphasis(text, i);
      if (span) { flush(); out.push(span.node); i = span.end; continue; }
    }
    buf += c;
    i++;
  }
  flush();
  return out;
}

function anchor(url, children) {
  const href = safeUrl(url);
  if (!href) return h("span", { class: "link-refused", title: "not a web link" }, children);
  return h("a", { href, target: "_blank", rel: "noopener noreferrer nofollow" }, children);
}

/** `[label](url "title")` starting at `i`: its label, url and end, or null. */
function parseLink(text, i) {
  let depth = 0;
  let j = i;
  for (; j < text.length; j++) {
    if (text[j] === "\\") { j++; continue; }
    if (text[j] === "[") depth++;
    else if (text[j] === "]" && --depth === 0) break;
  }
  if (j >= text.length || text[j + 1] !== "(") return null;
  let k = j + 2; // the destination may hold balanced parentheses: (https://en.wikipedia.org/wiki/A_(b))
  for (let open = 1; k < text.length; k++) {
    if (text[k] === "(") open++;
    else if (text[k] === ")" && --open === 0) break;
  }
  if (k >= text.length) return null;
  const m = /^\s*<?(\S*?)>?(?:\s+"[^"]*")?\s*$/.exec(text.slice(j + 2, k));
  if (!m) return null;
  return { label: text.slice(i + 1, j), url: m[1], end: k + 1 };
}

/** `**strong**`, `*em*`, `__strong__`, `_em_`, `~~del~~` at `i`, when it closes. */
function emphasis(text, i) {
  const c = text[i];
  const run = c === "~" ? (text.startsWith("~~", i) ? "~~" : null) : text.startsWith(c + c, i) ? c + c : c;
  if (!run) return null;
  const open = i + run.length;
  if (!text[open] || /\s/.test(text[open])) return null;
  if (c === "_" && i > 0 && /\w/.test(text[i - 1])) return null; // snake_case stays as it is
  for (let end = text.indexOf(run, open + 1); end > 0; end = text.indexOf(run, end + 1)) {
    if (/\s/.test(text[end - 1])) continue;
    if (c === "_" && /\w/.test(text[end + run.length] || "")) continue;
    if (run.length === 1 && text[end + 1] === c) { end++; continue; } // part of a longer run
    const tag = c === "~" ? "del" : run.length === 2 ? "strong" : "em";
    return { node: h(tag, null, inline(text.slice(open, end))), end: end + run.length };
  }
  return null;
}
