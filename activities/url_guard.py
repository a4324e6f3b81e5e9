"""Refuse URLs a crawl must not fetch: other schemes, and (unless allowed)
anything on the worker's own network, e.g. cloud metadata services (SSRF).

URLs are parsed with httpx, the same parser the crawler connects with. The
check runs before every request, redirects included; a DNS answer that changes
between the check and the connection (DNS rebinding) is not caught.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket

import httpx

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

# Cloud metadata endpoints (AWS, AWS IPv6, Alibaba). Most are already non-global;
# listed so the intent survives changes to the ipaddress module's tables.
METADATA_ADDRESSES = frozenset(ipaddress.ip_address(a) for a in ("169.254.169.254", "fd00:ec2::254", "100.100.100.200"))


class UnsafeURL(ValueError):
    """The URL may not be fetched; the message says why."""


def _literal(host: str) -> IPAddress | None:
    """The address ``host`` spells, counting the forms inet_aton accepts
    (``127.1``, ``0x7f000001``, ``2130706433``, ``0177.0.0.1``)."""
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    try:
        return ipaddress.IPv4Address(socket.inet_aton(host))
    except OSError:
        return None


def _blocked(ip: IPAddress) -> bool:
    """True for loopback, private, link-local, multicast, reserved, unspecified,
    shared (100.64/10) and metadata addresses, also inside IPv4-mapped or 6to4 IPv6."""
    if isinstance(ip, ipaddress.IPv6Address):
        ip = ip.ipv4_mapped or ip.sixtofour or ip
    # is_global is False for every non-public range except multicast.
    return ip in METADATA_ADDRESSES or ip.is_multicast or not ip.is_global


async def check_url(url: str, allow_private: bool) -> None:
    """Raise UnsafeURL unless ``url`` is http(s) with a host that is, and
    resolves only to, public addresses (just the scheme and host if ``allow_private``)."""
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL as e:
        raise UnsafeURL(f"malformed URL {url!r}: {e}") from None
    if parsed.scheme not in ("http", "https"):
        raise UnsafeURL(f"only http and https URLs can be crawled, not {url!r}")
    host = parsed.raw_host.decode("ascii")
    if not host:
        raise UnsafeURL(f"URL has no host: {url!r}")
    if allow_private:
        return
    literal = _literal(host)
    if literal is not None:
        addresses = {literal}
    else:
        loop = asyncio.get_running_loop()
        try:
            infos = await loop.getaddrinfo(host, None, type=socket.SOCK_STREAM)
        except (socket.gaierror, UnicodeError) as e:
            raise UnsafeURL(f"cannot resolve host {host!r}: {e}") from None
        # sockaddr[0] may carry an IPv6 scope ("fe80::1%eth0"); ip_address accepts it.
        addresses = {ipaddress.ip_address(info[4][0]) for info in infos}
    for ip in addresses:
        if _blocked(ip):
            raise UnsafeURL(f"refusing to fetch {host!r}: {ip} is not a public address")
