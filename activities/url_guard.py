"""Refuse URLs a crawl must not fetch: other schemes, and (unless allowed)
anything on the worker's own network, e.g. cloud metadata services (SSRF).

URLs are parsed with httpx, the same parser the crawler connects with. The
check runs before every request, redirects included, and returns the
addresses it checked; the crawler connects only to those (``PinnedBackend``),
so a DNS answer that changes between the check and the connection (DNS
rebinding) cannot send it elsewhere. IPv4 addresses embedded in IPv6 (mapped,
translated, compatible, 6to4, NAT64) are checked as the IPv4 they carry.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket

import httpcore
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


NAT64 = (ipaddress.ip_network("64:ff9b::/96"), ipaddress.ip_network("64:ff9b:1::/48"))
TRANSLATED = ipaddress.ip_network("::ffff:0:0:0/96")  # IPv4-translated (RFC 2765)
COMPATIBLE = ipaddress.ip_network("::/96")  # IPv4-compatible (deprecated), :: and ::1 included


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if ip.ipv4_mapped or ip.sixtofour:
        return ip.ipv4_mapped or ip.sixtofour
    if any(ip in net for net in NAT64) or ip in TRANSLATED or (ip in COMPATIBLE and int(ip) > 1):
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def _blocked(ip: IPAddress) -> bool:
    """True for loopback, private, link-local, multicast, reserved, unspecified,
    shared (100.64/10) and metadata addresses, also inside IPv6 forms that
    carry an IPv4 address."""
    if isinstance(ip, ipaddress.IPv6Address):
        inner = _embedded_ipv4(ip)
        if inner is not None and (inner in METADATA_ADDRESSES or inner.is_multicast or not inner.is_global):
            return True
    # is_global is False for every non-public range except multicast.
    return ip in METADATA_ADDRESSES or ip.is_multicast or not ip.is_global


async def check_url(url: str, allow_private: bool) -> list[str]:
    """Raise UnsafeURL unless ``url`` is http(s) with a host that is, and
    resolves only to, public addresses (just the scheme and host if
    ``allow_private``). Returns the checked addresses to connect to ([] when
    private addresses are allowed: then the name is resolved as usual)."""
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
        return []
    literal = _literal(host.strip("[]"))
    if literal is not None:
        addresses = [literal]
    else:
        try:
            infos = await resolve(host)
        except (socket.gaierror, UnicodeError) as e:
            raise UnsafeURL(f"cannot resolve host {host!r}: {e}") from None
        # sockaddr[0] may carry an IPv6 scope ("fe80::1%eth0"); ip_address accepts it.
        addresses = list(dict.fromkeys(ipaddress.ip_address(info[4][0]) for info in infos))
    for ip in addresses:
        if _blocked(ip):
            raise UnsafeURL(f"refusing to fetch {host!r}: {ip} is not a public address")
    return [str(ip) for ip in addresses]


async def resolve(host: str) -> list:
    """The system resolver's answer for ``host`` (getaddrinfo)."""
    return await asyncio.get_running_loop().getaddrinfo(host, None, type=socket.SOCK_STREAM)


class PinnedBackend(httpcore.AsyncNetworkBackend):
    """Connects only to addresses ``check_url`` approved for the host
    (``pins``); a host without pins is refused unless private addresses are
    allowed. TLS still verifies the certificate for the host name."""

    def __init__(self, allow_private: bool) -> None:
        self.allow_private = allow_private
        self.pins: dict[str, list[str]] = {}
        self._backend = httpcore.AnyIOBackend()

    async def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
        addresses = self.pins.get(host.strip("[]"))
        if not addresses:
            if not self.allow_private:
                raise httpcore.ConnectError(f"{host} was not checked before connecting")
            addresses = [host]
        failure: Exception | None = None
        for address in addresses:
            try:
                return await self._backend.connect_tcp(address, port, timeout, local_address, socket_options)
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as err:
                failure = err
        raise failure  # type: ignore[misc]

    async def connect_unix_socket(self, *args, **kwargs):
        raise httpcore.ConnectError("unix sockets are not crawled")

    async def sleep(self, seconds: float) -> None:
        await self._backend.sleep(seconds)


class PinnedTransport(httpx.AsyncHTTPTransport):
    """httpx's transport over a connection pool that uses ``PinnedBackend``."""

    def __init__(self, backend: PinnedBackend, verify) -> None:
        super().__init__(verify=verify, trust_env=False)
        # httpx builds its pool without a network_backend option: replace it
        # (tests/test_crawl.py checks that connections go through the pins).
        self._pool = httpcore.AsyncConnectionPool(ssl_context=verify, network_backend=backend, max_connections=10)
