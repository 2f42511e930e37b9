"""Images attached to user input, carried as `data:` URLs whose bytes are checked to be what they say.

An image is data, never a path someone else's process reads. A client that sends one over the network
(`auger serve`'s API, an editor over ACP) sends a data URL; one that lets its user pick a file on their own
machine (`auger exec --image`, the terminal's `@image`, `Session.run(images=[path])`) reads that file itself
(`user_data_url`) and sends the data. The engine turns what a local op still names as a path into data
when it records the message, reading it only beneath the project's root handle (`project_data_url`), so
stored messages and model requests carry the image itself. A model client reads no path: an old message
naming one gets a note that its image is no longer available.

A data URL is believed only when its bytes really are an image of the type it names (their magic
numbers), in one of the types every provider takes, within `MAX_BYTES`.
"""

from __future__ import annotations

import base64
import binascii
import errno
import os
import stat
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from auger.policy.fs import RootHandle

SUPPORTED = ("image/png", "image/jpeg", "image/gif", "image/webp")
MAX_BYTES = 20 * 1024 * 1024
_SHAPE = "data:image/png;base64,..."  # how an image is written, for messages


class ImageError(ValueError):
    """An image that cannot be sent; the message names it and says why."""


def image_type(raw: bytes) -> str | None:
    """The supported image type `raw` is, by its magic numbers; None for anything else."""
    if raw.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if raw.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if raw.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if raw[:4] == b"RIFF" and raw[8:12] == b"WEBP":
        return "image/webp"
    return None


def split_data_url(ref: str) -> tuple[str, str]:
    """(media type, base64 data) of an image data URL, without decoding it: what a model request carries.
    ImageError for anything that is not a base64 data URL of a supported type (a path included)."""
    if not ref.startswith("data:"):
        raise ImageError(f"{_shown(ref)} is not an image data URL ({_SHAPE})")
    header, sep, data = ref.partition(",")
    media = header[5:].split(";")[0].strip().lower()
    if not sep or ";base64" not in header:
        raise ImageError(f"an image data URL must be base64: {_SHAPE}")
    if media not in SUPPORTED:
        raise ImageError(f"unsupported image type {media!r}; use one of {', '.join(SUPPORTED)}")
    return media, data


def checked_data_url(ref: str) -> str:
    """The data URL `ref`, written plainly (`data:TYPE;base64,DATA`), once its data has been decoded and
    found to be an image of the type it names, within MAX_BYTES; ImageError otherwise."""
    media, data = split_data_url(ref)
    if len(data) > (MAX_BYTES + 2) // 3 * 4:
        raise ImageError(f"image is over {MAX_BYTES} bytes")
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise ImageError("an image data URL's data is not valid base64") from None
    found = image_type(raw)
    if found != media:
        what = f"a {found.partition('/')[2].upper()} image" if found else "no image"
        raise ImageError(f"this data URL says {media} but its data is {what}: send the image's own bytes")
    return f"data:{media};base64,{data}"


def user_data_url(ref: str) -> str:
    """An image the user gave on their own machine, as a data URL: a data URL checked, or the image file
    it names read here — the user's own choice of file, for a client to send as data (the engine never
    calls this: it reads beneath the project, `project_data_url`)."""
    if ref.startswith("data:"):
        return checked_data_url(ref)
    try:
        fd = os.open(os.path.expanduser(ref), os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)  # a FIFO never blocks
        with open(fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise OSError(errno.EINVAL, "not a regular file")
            raw = handle.read(MAX_BYTES + 1)
    except OSError as exc:
        raise ImageError(f"{_shown(ref)}: cannot read image ({exc.strerror or exc})") from None
    return _as_data_url(ref, raw)


def project_data_url(root: RootHandle, ref: str) -> str:
    """An image a local op names as a data URL: a data URL checked, a path read beneath the project root
    (never through `..` or a symlink out of it, as the file tools open files)."""
    from auger.policy.paths import PathEscape
    from auger.policy.fs import read_beneath

    if ref.startswith("data:"):
        return checked_data_url(ref)
    try:
        raw = read_beneath(root, ref, limit=MAX_BYTES)
    except PathEscape as exc:
        raise ImageError(f"image {exc}") from None
    except OSError as exc:
        if exc.errno == errno.EFBIG:
            raise ImageError(f"{_shown(ref)}: image is over {MAX_BYTES} bytes") from None
        raise ImageError(f"{_shown(ref)}: cannot read image ({exc.strerror or exc})") from None
    return _as_data_url(ref, raw)


def _as_data_url(name: str, raw: bytes) -> str:
    if len(raw) > MAX_BYTES:
        raise ImageError(f"{_shown(name)}: image is over {MAX_BYTES} bytes")
    media = image_type(raw)
    if media is None:
        raise ImageError(f"{_shown(name)}: not a supported image ({', '.join(SUPPORTED)})")
    return f"data:{media};base64,{base64.b64encode(raw).decode('ascii')}"


def _shown(ref: str) -> str:
    """A reference as a message shows it: a path whole, a data URL only by its start."""
    return ref if len(ref) <= 200 else ref[:60] + "…"


def attachments(refs: list[str], *, strict: bool) -> tuple[list[tuple[str, str]], list[str]]:
    """The (media type, base64 data) of each image a message carries, and a note for each it cannot send.

    With `strict` (the message being sent now) a data URL that is malformed raises ImageError. A path (a
    message recorded before images were stored as data) is never read: it becomes a note, as does a bad
    image of an earlier message, so one lost image cannot make a session unusable."""
    loaded: list[tuple[str, str]] = []
    notes: list[str] = []
    for ref in refs:
        try:
            loaded.append(split_data_url(ref))
        except ImageError as exc:
            if strict and ref.startswith("data:"):
                raise
            notes.append(f"[an image attached here is no longer available: {exc}]")
    return loaded, notes
