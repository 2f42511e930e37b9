"""A web page as readable, Markdown-like text with the standard library alone (`html.parser`): what
web_fetch shows without the `web` extra, whose markdownify makes proper Markdown (tools/web_convert.py).

What a browser needs and a reader does not is dropped: scripts, styles, templates, the head's metadata,
navigation, forms (the same tags the Markdown path drops). What is left keeps its structure: headings as
`#` lines, paragraphs and block elements apart, list items as `- ` (or `1. `) indented by depth, table
cells between `|`, preformatted text fenced and kept as written, links as `[text](url)` with the URL
made absolute against the page's, images as `![alt](url)` when they have an alt text. The page's
`<title>` heads the text when no heading starts it.

HTML leaves many end tags out (`</p>`, `</li>`, `</head>`); the parser keeps a stack of open elements
and closes them the way a browser would where it matters here (a new `p`, `li`, `dt`/`dd`, row or cell;
an end tag closing what it contains), so a dropped element never swallows the rest of the page.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from urllib.parse import urljoin

# What a reader does not need, dropped with all it holds (web_convert's Markdown path drops the same). Not
# `head`: what it holds is dropped anyway (scripts, styles) or says nothing (meta, link) or is the title, taken
# apart; and its end tag may be left out, which would make a dropped `head` take the whole page with it.
DROPPED = frozenset(("script", "style", "noscript", "svg", "template", "iframe", "form", "nav", "footer", "aside",
                     "button", "canvas"))
VOID = frozenset(("area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track",
                  "wbr"))
PARAGRAPHS = frozenset(("p", "pre", "blockquote", "table", "dl", "figure", "section", "article", "main", "header",
                        "address", "details", "h1", "h2", "h3", "h4", "h5", "h6"))
LINES = frozenset(("div", "li", "tr", "dt", "dd", "figcaption", "summary", "caption"))
LISTS = ("ul", "ol")
BLOCKS = PARAGRAPHS | LINES | frozenset((*LISTS, "form", "nav", "footer", "aside"))  # each closes an open `p`
# a start tag closes an open element of these kinds, unless one of the `within` is open nearer
P_SCOPE = ("table", "td", "th", "caption", "button", "template")
IMPLIED_END = {"li": (("li",), LISTS), "dt": (("dt", "dd"), ("dl",)),
               "dd": (("dt", "dd"), ("dl",)), "tr": (("tr", "td", "th"), ("table",)),
               "td": (("td", "th"), ("tr", "table")), "th": (("td", "th"), ("tr", "table"))}
_SPACES = re.compile(r"\s+")
_BLANK_RUNS = re.compile(r"\n{3,}")
_TRAILING = re.compile(r"[ \t]+\n")


def html_to_text(html: str, url: str) -> str:
    """The page's text (see the module docstring); links and images absolute against `url`."""
    parser = _Reader(url)
    parser.feed(html)
    parser.close()
    text = _BLANK_RUNS.sub("\n\n", _TRAILING.sub("\n", "".join(parser.out))).strip()
    title = " ".join("".join(parser.title).split())
    if title and not text.startswith("# "):
        text = f"# {title}\n\n{text}".rstrip()
    return text


class _Reader(HTMLParser):
    def __init__(self, url: str) -> None:
        super().__init__(convert_charrefs=True)
        self.url = url
        self.out: list[str] = []
        self.title: list[str] = []
        self._stack: list[str] = []
        self._dropped_at: int | None = None  # the stack depth of the dropped element being skipped
        self._in_title = False
        self._newlines = 0  # line breaks owed before the next text
        self._fresh = True  # at the start of a line (or just after a marker): leading spaces are dropped
        self._marked = False  # a marker (`- `, `# `) was the last thing written
        self._links: list[tuple[int, str, int]] = []  # (stack depth, absolute href, where its text starts in out)
        self._counters: list[int] = []  # the number of the next item of each open ordered list
        self._cells: list[int] = []  # the cells seen so far in each open table row

    # -- the parser's callbacks ----------------------------------------------------------------
    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "title":
            self._in_title = True
            return
        if tag in VOID:
            if self._dropped_at is None:
                self._void(tag, dict(attrs))
            return
        if self._dropped_at is not None:  # kept on the stack all the same, so end tags find their element
            self._stack.append(tag)
            return
        self._close_implied(tag)
        self._stack.append(tag)
        if tag in DROPPED:
            self._dropped_at = len(self._stack)
            return
        self._open(tag, dict(attrs))

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in VOID:
            self.handle_starttag(tag, attrs)
        # `<div/>` and the like: HTML ignores the slash; an element with nothing in it adds nothing

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self._in_title = False
            return
        if tag in self._stack:
            while self._stack:
                if self._pop() == tag:
                    break

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title.append(data)
            return
        if self._dropped_at is not None:
            return
        if "pre" in self._stack:
            self._write(data, raw=True)
            return
        text = _SPACES.sub(" ", data)
        if self._fresh or (self.out and self.out[-1].endswith(" ")):
            text = text.lstrip(" ")
        if text:
            self._write(text)

    def close(self) -> None:
        super().close()
        while self._stack:
            self._pop()

    # -- elements ------------------------------------------------------------------------------
    def _open(self, tag: str, attrs: dict[str, str | None]) -> None:
        self._break(self._apart(tag, opening=True))
        if len(tag) == 2 and tag[0] == "h" and tag[1] in "123456":
            self._marker("#" * int(tag[1]) + " ")
        elif tag == "li":
            self._list_item()
        elif tag == "ol":
            self._counters.append(_start(attrs.get("start")))
        elif tag == "tr":
            self._cells.append(0)
        elif tag == "pre":
            self._marker("```\n")
        elif tag == "code" and "pre" not in self._stack[:-1]:
            self._write("`")
        elif tag in ("td", "th") and self._cell_index() > 0:
            self._write(" | ")
        elif tag == "a":
            href = (attrs.get("href") or "").strip()
            self._links.append((len(self._stack), urljoin(self.url, href) if href else "", len(self.out)))

    def _pop(self) -> str:
        tag = self._stack.pop()
        depth = len(self._stack) + 1
        if self._dropped_at is not None:
            if depth == self._dropped_at:
                self._dropped_at = None
            return tag
        if tag == "a" and self._links and self._links[-1][0] == depth:
            self._link_end(*self._links.pop()[1:])
        elif tag == "code" and "pre" not in self._stack:
            self._write("`")
        elif tag == "pre":
            if not "".join(self.out[-1:]).endswith("\n"):
                self._break(1)
            self._write("```", raw=True)
        elif tag == "ol" and self._counters:
            self._counters.pop()
        elif tag == "tr" and self._cells:
            self._cells.pop()
        self._break(self._apart(tag, opening=False))
        return tag

    def _apart(self, tag: str, opening: bool) -> int:
        """The line breaks that set the element apart from what is around it (0: it flows with the text);
        a list inside another list's item is a line apart, a list on its own a paragraph."""
        if tag in PARAGRAPHS:
            return 1 if "li" in self._stack else 2  # a list item's paragraphs keep the list together
        if tag in LISTS:
            return 1 if sum(t in LISTS for t in self._stack) > (1 if opening else 0) else 2
        return 1 if tag in LINES else 0

    def _void(self, tag: str, attrs: dict[str, str | None]) -> None:
        if tag == "br":
            self._newlines = max(self._newlines, 1) if self.out else 0
            self._fresh = True
        elif tag == "hr":
            self._break(2)
            self._write("---", raw=True)
            self._break(2)
        elif tag == "img":
            alt, src = " ".join((attrs.get("alt") or "").split()), (attrs.get("src") or "").strip()
            if alt and src:
                self._write(f"![{alt}]({urljoin(self.url, src)})")

    def _close_implied(self, tag: str) -> None:
        if tag in BLOCKS:
            self._close_open(("p",), P_SCOPE)
        closes, within = IMPLIED_END.get(tag, ((), ()))
        self._close_open(closes, within)

    def _close_open(self, closes: tuple[str, ...], within: tuple[str, ...]) -> None:
        """Close the nearest open element named in `closes` (and what it holds), unless one of `within` is
        open nearer."""
        for i in range(len(self._stack) - 1, -1, -1):
            if self._stack[i] in within:
                return
            if self._stack[i] in closes:
                while len(self._stack) > i:
                    self._pop()
                return

    def _list_item(self) -> None:
        lists = [t for t in self._stack if t in LISTS]
        indent = "  " * max(0, len(lists) - 1)
        if lists and lists[-1] == "ol" and self._counters:
            self._marker(f"{indent}{self._counters[-1]}. ")
            self._counters[-1] += 1
        else:
            self._marker(f"{indent}- ")

    def _cell_index(self) -> int:
        """How many cells of the current row came before this one."""
        if not self._cells:
            return 0
        self._cells[-1] += 1
        return self._cells[-1] - 1

    def _link_end(self, href: str, start: int) -> None:
        written = "".join(self.out[start:])  # may begin with the line breaks owed before the link's text
        text = written.strip()
        if not text or not href or href.startswith(("javascript:", "data:")) or href.split("#", 1)[0] == \
                self.url.split("#", 1)[0] or text == href:
            return  # its text stands alone: nothing to follow, or the URL is the text
        lead, tail = written[:len(written) - len(written.lstrip())], written[len(written.rstrip()):]
        self.out[start:] = [f"{lead}[{text}]({href}){tail}"]

    # -- writing -------------------------------------------------------------------------------
    def _break(self, lines: int) -> None:
        if not lines:
            return
        if self.out and not self._marked:  # a paragraph just after a list item's marker starts on its line
            self._newlines = max(self._newlines, lines)
        self._fresh = True

    def _marker(self, text: str) -> None:
        self._write(text, raw=True)
        self._fresh = self._marked = True

    def _write(self, text: str, raw: bool = False) -> None:
        if self._newlines:
            self.out.append("\n" * self._newlines)
            self._newlines = 0
        self.out.append(text)
        self._fresh = raw and text.endswith("\n")
        self._marked = False


def _start(value: str | None) -> int:
    try:
        return int(value or 1)
    except ValueError:
        return 1
