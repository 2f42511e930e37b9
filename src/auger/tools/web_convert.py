"""A fetched body as text the model can read: HTML as Markdown, PDF as its text, text as it is.

The converters are optional (the `web` extra: markdownify, which brings BeautifulSoup, and pypdf) and
imported on the first page that needs them (~0.15 s each), never at start-up. Without them an HTML page
is read with the standard library's parser (tools/html_text.py: the text with its structure, links and
headings kept, Markdown-like) and a PDF is a one-line note saying what to install.

HTML loses what only a browser needs (head, scripts, styles, navigation, forms); its links are made
absolute against the page's URL, so a link the model reads is one it can fetch as written.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urljoin

from auger.tools.html_text import DROPPED

HTML_TYPES = ("text/html", "application/xhtml+xml")
TEXT_TYPES = ("application/json", "application/xml", "application/javascript", "application/x-yaml",
              "application/yaml", "application/toml")
_BLANK_RUNS = re.compile(r"\n{3,}")
_META_CHARSET = re.compile(rb"""<meta[^>]+charset=["']?([A-Za-z0-9_.:-]+)""", re.IGNORECASE)


@dataclass(frozen=True)
class Converted:
    kind: str  # "markdown" | "html-text" (HTML read without the web extra) | "pdf" | "text" | "binary"
    text: str


def media_type(content_type: str) -> str:
    return content_type.split(";", 1)[0].strip().lower()


def convert(body: bytes, content_type: str, url: str) -> Converted:
    """The body as text, by its media type (sniffed when the server sent none)."""
    kind = media_type(content_type) or _sniff(body)
    if kind in HTML_TYPES:
        return _html(body, content_type, url)
    if kind == "application/pdf":
        return _pdf(body)
    if kind.startswith("text/") or kind in TEXT_TYPES or kind.endswith(("+json", "+xml")):
        return Converted("text", decode(body, content_type))
    return Converted("binary", f"[{kind or 'binary'} content, {len(body):,} bytes: not shown]")


def decode(body: bytes, content_type: str) -> str:
    charset = _charset(content_type) or _meta_charset(body) or "utf-8"
    try:
        return body.decode(charset, "replace")
    except LookupError:  # a charset Python does not know
        return body.decode("utf-8", "replace")


def _sniff(body: bytes) -> str:
    head = body[:512].lstrip().lower()
    if head.startswith(b"%pdf-"):
        return "application/pdf"
    if head.startswith((b"<!doctype html", b"<html")):
        return "text/html"
    return ""


def _charset(content_type: str) -> str | None:
    for param in content_type.split(";")[1:]:
        name, _, value = param.partition("=")
        if name.strip().lower() == "charset" and value.strip():
            return value.strip().strip('"')
    return None


def _meta_charset(body: bytes) -> str | None:
    found = _META_CHARSET.search(body[:4096])
    return found.group(1).decode("ascii") if found else None


def _html(body: bytes, content_type: str, url: str) -> Converted:
    from auger.extras import MissingExtra, importing

    text = decode(body, content_type)
    try:
        with importing("web", "HTML as Markdown"):
            from bs4 import BeautifulSoup
            from markdownify import MarkdownConverter
    except MissingExtra:
        from auger.tools.html_text import html_to_text

        return Converted("html-text", html_to_text(text, url))
    soup = BeautifulSoup(text, "html.parser")
    title = soup.title.get_text(" ", strip=True) if soup.title else ""
    for dropped in soup.find_all([*DROPPED, "title"]):  # the title is put back as a heading
        if not dropped.decomposed:  # a dropped tag inside another one went with it
            dropped.decompose()
    for name, attr in (("a", "href"), ("img", "src")):
        for element in soup.find_all(name):
            value = element.get(attr)
            if isinstance(value, str) and value.strip():
                element[attr] = urljoin(url, value.strip())
    markdown = MarkdownConverter(heading_style="ATX", bullets="-", escape_underscores=False,
                                 escape_asterisks=False).convert_soup(soup)
    markdown = _BLANK_RUNS.sub("\n\n", markdown).strip()
    if title and not markdown.startswith("# "):
        markdown = f"# {title}\n\n{markdown}"
    return Converted("markdown", markdown)


def _pdf(body: bytes) -> Converted:
    from auger.extras import MissingExtra, importing

    try:
        with importing("web", "a PDF's text"):
            from pypdf import PdfReader
            from pypdf.errors import PyPdfError
    except MissingExtra as exc:
        return Converted("pdf", f"[PDF: {len(body):,} bytes, not converted: {exc}]")
    import io

    try:
        reader = PdfReader(io.BytesIO(body))
        pages = [page.extract_text() or "" for page in reader.pages]
    except (PyPdfError, ValueError, KeyError, TypeError) as exc:  # a damaged or encrypted file
        return Converted("pdf", f"[PDF: {len(body):,} bytes, its text could not be read: {exc}]")
    text = "\n\n".join(f"--- page {n} ---\n{page.strip()}" for n, page in enumerate(pages, 1))
    return Converted("pdf", text or f"[PDF: {len(body):,} bytes, {len(pages)} pages without text (scanned?)]")
