"""One GET through the web policy (policy/web.py): the address checked is the address connected to.

    resolve the host once (`egress_hosts` first, then DNS) → every address must pass the policy's address
    check → connect to that address, the name going in `Host` and in the TLS SNI (so the certificate is
    verified against the name) → on a redirect, check the new URL as a new request, then go on

Resolving once and connecting to the result is what defeats DNS rebinding: a name cannot answer a public
address to the check and 127.0.0.1 to the connection. A redirect may go to a host in the allowlist, or
stay on the host the call was allowed or approved for; anywhere else is refused (and said: the model may
fetch that URL itself, which asks). The body is read up to a cap, decoded from its content encoding.
No proxy from the environment is used, no cookies are kept, no credentials are sent.
"""

from __future__ import annotations

import asyncio
import socket
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from urllib.parse import urljoin

from auger.policy.web import Address, Target, UrlRefused, WebPolicy, ip_of, parse_url

if TYPE_CHECKING:
    import httpx

MAX_REDIRECTS = 5
CONNECT_TIMEOUT = 10.0
READ_TIMEOUT = 30.0
TOTAL_TIMEOUT = 60.0
REDIRECTS = (301, 302, 303, 307, 308)


class FetchFailed(Exception):
    """The request could not be made or answered (the message says why); not a policy refusal."""


@dataclass
class Fetched:
    url: str  # the last URL requested (after redirects)
    status: int
    reason: str
    content_type: str
    body: bytes
    truncated: bool  # the body was longer than the cap and was cut
    redirects: list[str] = field(default_factory=list)  # the URLs redirected from, in order


async def fetch(url: str, policy: WebPolicy, *, accept: str, user_agent: str, max_bytes: int) -> Fetched:
    """GET `url` (already allowed or approved) and follow its redirects within the policy.

    UrlRefused when a redirect or an address is against the policy; FetchFailed when the web failed."""
    import httpx

    from auger.models import tls

    first = parse_url(url)
    target = first
    redirects: list[str] = []
    timeout = httpx.Timeout(connect=CONNECT_TIMEOUT, read=READ_TIMEOUT, write=READ_TIMEOUT, pool=CONNECT_TIMEOUT)
    try:
        verify = tls.context()  # the process's, as the model clients use (SSL_CERT_FILE respected)
    except tls.TlsError as exc:
        raise FetchFailed(str(exc)) from None
    async with httpx.AsyncClient(verify=verify, timeout=timeout, follow_redirects=False, trust_env=False) as client:
        try:
            async with asyncio.timeout(TOTAL_TIMEOUT):
                while True:
                    response = await _get(client, target, policy, accept, user_agent)
                    try:
                        location = response.headers.get("location")
                        if response.status_code not in REDIRECTS or not location:
                            body, truncated = await _read(response, max_bytes)
                            return Fetched(target.url, response.status_code, response.reason_phrase,
                                           response.headers.get("content-type", ""), body, truncated, redirects)
                    finally:
                        await response.aclose()
                    if len(redirects) >= MAX_REDIRECTS:
                        raise FetchFailed(f"more than {MAX_REDIRECTS} redirects (last to {location})")
                    redirects.append(target.url)
                    target = _redirect(first, target, location, policy)
        except TimeoutError:
            raise FetchFailed(f"no complete answer within {TOTAL_TIMEOUT:.0f} s") from None
        except httpx.HTTPError as exc:
            raise FetchFailed(_describe(exc)) from None


def _redirect(first: Target, current: Target, location: str, policy: WebPolicy) -> Target:
    """The redirect's target, when the policy lets the call go there."""
    target = parse_url(urljoin(current.url, location))
    if not policy.allowed(target) and target.host != first.host:
        raise UrlRefused(f"{current.url} redirects to {target.url}, and {target.host} is not in the egress "
                         "allowlist: fetch that URL itself if it is needed (it asks)")
    return target


async def _get(client: httpx.AsyncClient, target: Target, policy: WebPolicy, accept: str,
               user_agent: str) -> httpx.Response:
    """Send the request to a checked address of the target's host."""
    import httpx

    last: Exception | None = None
    for address in await resolve(target, policy):
        pinned = httpx.URL(target.url).copy_with(host=str(address))
        default_port = 443 if target.scheme == "https" else 80
        host = f"[{target.host}]" if ":" in target.host else target.host
        headers = {"Host": host if target.port == default_port else f"{host}:{target.port}",
                   "Accept": accept, "User-Agent": user_agent}
        extensions = {"sni_hostname": target.host} if target.scheme == "https" else {}
        request = client.build_request("GET", pinned, headers=headers, extensions=extensions)
        try:
            return await client.send(request, stream=True)
        except httpx.ConnectError as exc:
            last = exc
    raise FetchFailed(f"cannot connect to {target.host}:{target.port}: {last or 'no address'}")


async def resolve(target: Target, policy: WebPolicy) -> list[Address]:
    """The addresses of the target's host, each passing the policy's address check (one that does not
    refuses the whole name: a name answering both kinds is not trusted with either)."""
    literal = target.address or ip_of(policy.hosts.get(target.host, ""))
    if literal is not None:
        policy.check_address(target, literal)
        return [literal]
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(target.host, target.port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise FetchFailed(f"cannot resolve {target.host}: {getattr(exc, 'strerror', None) or exc}") from None
    addresses: list[Address] = []
    for family, _, _, _, sockaddr in infos:
        address = ip_of(str(sockaddr[0]).split("%", 1)[0]) if family in (socket.AF_INET, socket.AF_INET6) else None
        if address is not None and address not in addresses:
            policy.check_address(target, address)
            addresses.append(address)
    if not addresses:
        raise FetchFailed(f"{target.host} has no IPv4 or IPv6 address")
    return addresses


async def _read(response: httpx.Response, max_bytes: int) -> tuple[bytes, bool]:
    """The decoded body up to `max_bytes` (a compressed bomb stops there too)."""
    body = bytearray()
    async for chunk in response.aiter_bytes():
        body += chunk
        if len(body) > max_bytes:
            return bytes(body[:max_bytes]), True
    return bytes(body), False


def _describe(exc: Exception) -> str:
    import httpx

    if isinstance(exc, httpx.TimeoutException):
        return f"timed out ({type(exc).__name__})"
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
