"""The web policy: which URLs auger itself may fetch (`web_fetch`), and what a fetch counts as.

A fetch runs in auger's own process, not in the sandbox, so the egress proxy never sees it: this
module applies the session's egress policy in code, with the proxy's own `Allowlist`
(policy/egress.py), the same default development list plus `egress_allow`, and the same static
`egress_hosts` names.

    scheme other than http/https, credentials in the URL       refused
    host in the allowlist                                       read-only: runs in every mode
    any other host                                              a remote action: plan refuses, others ask
    an address that is not public (loopback, private, link-local, …), named directly or reached
    through DNS or `egress_hosts`                               refused, unless the user listed the name
                                                                (or address) in `egress_allow` themselves

"Listed in `egress_allow`" is the explicit consent for a private address: the default development
list never reaches one, so a public name that resolves to 127.0.0.1 (DNS rebinding) is refused. A name
is resolved once per request and the connection goes to that address (tools/web_http.py), so the
address checked is the address used.

A fetch is classified like a command named `web_fetch HOST`: exec-policy rules match it by that
prefix (`prefix = "web_fetch docs.python.org"`), and an approval "for this session" covers the host.
Which URLs may be fetched at all (those that reached the conversation from outside the model) is the
tool's own check (tools/provenance.py): it needs the conversation, which policy never sees.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from typing import Iterable, Mapping
from urllib.parse import SplitResult, urlsplit

from auger.policy.egress import DEFAULT_ALLOWLIST, Allowlist
from auger.policy.types import Classification, Effect

TOOL = "web_fetch"  # the first word of the argv a fetch is classified as
SCHEMES = ("http", "https")
Address = ipaddress.IPv4Address | ipaddress.IPv6Address


class UrlRefused(ValueError):
    """A URL no fetch may go to, whatever the user approves; the message says why."""


@dataclass(frozen=True)
class Target:
    """A URL taken apart: what is checked and what is connected to."""

    url: str
    scheme: str
    host: str  # lowercase, no brackets, no trailing dot
    port: int

    @property
    def address(self) -> Address | None:
        """The host when it is an IP literal."""
        return ip_of(self.host)


def parse_url(url: str) -> Target:
    """The URL's parts, or UrlRefused naming what is wrong with it."""
    if not isinstance(url, str) or not url.strip():
        raise UrlRefused("empty URL")
    if any(ch.isspace() or ord(ch) < 32 for ch in url.strip()):
        raise UrlRefused("the URL contains spaces or control characters")
    try:
        parts: SplitResult = urlsplit(url.strip())
        port = parts.port
    except ValueError as exc:
        raise UrlRefused(f"not a valid URL ({exc})") from None
    scheme = parts.scheme.lower()
    if scheme not in SCHEMES:
        raise UrlRefused(f"only http:// and https:// URLs are fetched, not {scheme + ':' if scheme else 'this'}")
    if parts.username is not None or parts.password is not None:
        raise UrlRefused("URLs with credentials (user:password@) are not fetched")
    host = host_key(parts.hostname or "")
    if not host:
        raise UrlRefused("the URL has no host")
    if not host.isascii():  # what goes on the wire, and what the allowlist compares
        raise UrlRefused("write an internationalised host name in its xn-- form")
    return Target(url.strip(), scheme, host, port or (443 if scheme == "https" else 80))


def host_key(host: str) -> str:
    """A host as the allowlist compares it: lowercase, IPv6 brackets and one trailing dot removed."""
    host = host.strip().lower()
    if host.startswith("[") and host.endswith("]"):
        return host[1:-1]
    return host[:-1] if host.endswith(".") else host


def ip_of(host: str) -> Address | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


def is_public(address: Address) -> bool:
    """Whether an address is on the public internet (an IPv4 address mapped into IPv6 is judged as IPv4)."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_global and not address.is_multicast


@dataclass(frozen=True)
class WebPolicy:
    """The session's egress policy as `web_fetch` applies it."""

    allowlist: Allowlist  # fetched without asking: the default development list plus the user's
    explicit: Allowlist  # the user's own `egress_allow`: the only names that may reach a private address
    hosts: Mapping[str, str] = field(default_factory=dict)  # `egress_hosts`: static name -> address
    any_url: bool = False  # `web_fetch_any_url`: URLs need not have appeared in the conversation

    @classmethod
    def build(cls, egress_allow: Iterable[str] = (), egress_hosts: Mapping[str, str] | None = None, *,
              any_url: bool = False) -> WebPolicy:
        """From the user's settings; a bad pattern raises ValueError naming it (as the proxy's does)."""
        user = list(egress_allow)
        hosts = {host_key(name): host_key(address) for name, address in (egress_hosts or {}).items()}
        for name, address in hosts.items():
            if ip_of(address) is None:
                raise ValueError(f"invalid egress hosts entry {name!r}: {address!r} is not an IP address")
        return cls(Allowlist([*DEFAULT_ALLOWLIST, *user]), Allowlist(user), hosts, any_url)

    def allowed(self, target: Target) -> bool:
        return self.allowlist.allows(target.host)

    def check_address(self, target: Target, address: Address) -> None:
        """UrlRefused when the host reaches a non-public address the user did not allow by name."""
        if is_public(address) or self.explicit.allows(target.host):
            return
        how = "is" if target.address is not None else f"resolves to {address}, which is"
        raise UrlRefused(f"{target.host} {how} a private or local address; fetched only when the user "
                         f"lists {target.host!r} in egress_allow")

    def check_literal(self, target: Target) -> None:
        """The address check for a host given as an IP literal (names are checked once resolved)."""
        if target.address is not None:
            self.check_address(target, target.address)

    def classify(self, url: str) -> Classification:
        """What fetching `url` counts as (see the module docstring); UrlRefused when it may never run."""
        target = parse_url(url)
        self.check_literal(target)
        argv = ((TOOL, target.host),)
        if self.allowed(target):
            return Classification(Effect.READ_ONLY, url, argv, reasons=(f"{target.host} is in the egress allowlist",))
        return Classification(Effect.REMOTE_ACTION, url, argv,
                              reasons=(f"{target.host} is not in the egress allowlist (egress_allow)",))
