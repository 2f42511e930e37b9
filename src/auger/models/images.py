"""Images attached to user input: a file path or a data URL, turned into (media type, base64 data)."""

from __future__ import annotations

import base64
import mimetypes
from pathlib import Path

SUPPORTED = ("image/png", "image/jpeg", "image/gif", "image/webp")
MAX_BYTES = 20 * 1024 * 1024


class ImageError(ValueError):
    """An image that cannot be sent; the message names it and says why."""


def load_image(ref: str) -> tuple[str, str]:
    """(media type, base64 data) for a `data:` URL or a path to an image file."""
    if ref.startswith("data:"):
        header, sep, data = ref.partition(",")
        media = header[5:].split(";")[0]
        if not sep or ";base64" not in header:
            raise ImageError("an image data URL must be base64: data:image/png;base64,...")
        if media not in SUPPORTED:
            raise ImageError(f"unsupported image type {media!r}; use one of {', '.join(SUPPORTED)}")
        return media, data
    path = Path(ref).expanduser()
    media = mimetypes.guess_type(path.name)[0] or ""
    if media not in SUPPORTED:
        raise ImageError(f"{ref}: not a supported image ({', '.join(SUPPORTED)})")
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ImageError(f"{ref}: cannot read image ({exc.strerror or exc})") from None
    if len(raw) > MAX_BYTES:
        raise ImageError(f"{ref}: image is {len(raw)} bytes; the limit is {MAX_BYTES}")
    return media, base64.b64encode(raw).decode("ascii")


def data_url(ref: str) -> str:
    media, data = load_image(ref)
    return f"data:{media};base64,{data}"


def attachments(refs: list[str], *, strict: bool) -> tuple[list[tuple[str, str]], list[str]]:
    """The (media type, base64 data) of each image that loads, and a note for each that no longer does.

    With `strict` (the message being sent now) an image that fails raises ImageError: that is the user's
    to fix now. An earlier message's image that no longer loads (a deleted screenshot, a session resumed
    on another machine) becomes a note instead, so one lost file cannot make a session unusable."""
    loaded: list[tuple[str, str]] = []
    notes: list[str] = []
    for ref in refs:
        try:
            loaded.append(load_image(ref))
        except ImageError as exc:
            if strict:
                raise
            notes.append(f"[an image attached here is no longer available: {exc}]")
    return loaded, notes
