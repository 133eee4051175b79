"""Which targets the exporter may probe, and which of them get the API key.

Whoever can reach the exporter names its `?target=`: without a policy it is a proxy into the
cluster's network (cloud metadata, the kubelet, internal admin pages) and hands
$LLMDOCTOR_API_KEY to any server it is told to visit. So:

* a target must match an `--allow-target` pattern: a CIDR or address (`10.0.0.0/8`,
  `fd00::/8`, `10.1.2.3`), a host (`vllm.serving`), or every host under a domain
  (`*.serving`: any Service of namespace `serving`). A Kubernetes Service matches in each of its
  spellings: `vllm.serving`, `vllm.serving.svc`, `vllm.serving.svc.cluster.local`. Without
  patterns only loopback is allowed (`127.0.0.0/8`, `::1`, `localhost`);
* a name is resolved and each of its addresses checked; the connection then checks the address
  it actually reached, so a name that resolves to an allowed address once and to another the
  next time (DNS rebinding) gains nothing;
* cloud metadata and link-local addresses are refused whatever the patterns say
  (169.254.0.0/16 with 169.254.169.254, fe80::/10, fd00:ec2::254, 100.100.100.200,
  metadata.google.internal), as are unspecified and multicast addresses;
* the API key goes only to targets matching an `--api-key-target` pattern (same forms).
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable
from dataclasses import dataclass, field

LOOPBACK_PATTERNS = ("127.0.0.0/8", "::1", "localhost")
METADATA_NAMES = frozenset(
    {
        "metadata.google.internal",
        "metadata.goog",
        "metadata",
        "instance-data",
        "instance-data.ec2.internal",
        "metadata.azure.com",
        "metadata.platformequinix.com",
    }
)
REFUSED_NETWORKS = tuple(
    ipaddress.ip_network(n)
    for n in (
        "169.254.0.0/16",  # link-local: AWS, GCP, Azure, OpenStack metadata; ECS credentials
        "fe80::/10",
        "fd00:ec2::254/128",  # AWS metadata over IPv6
        "100.100.100.200/32",  # Alibaba Cloud metadata
        "192.0.0.192/32",  # Oracle Cloud metadata (legacy)
        "0.0.0.0/8",
        "::/128",
        "224.0.0.0/4",
        "ff00::/8",
        "255.255.255.255/32",
    )
)
SERVICE_SUFFIXES = (".svc.cluster.local", ".svc")


class TargetRefused(ValueError):
    """A target the policy does not allow (the exporter answers 400 with the reason)."""


def _address(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        ip = ipaddress.ip_address(text.split("%", 1)[0])
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address):
        # an IPv4 address written as IPv6 (::ffff:169.254.169.254, 6to4, NAT64) is that address
        embedded = ip.ipv4_mapped or ip.sixtofour
        if embedded is None and ip in ipaddress.ip_network("64:ff9b::/96"):
            embedded = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
        if embedded is not None:
            return embedded
    return ip


def refused_address(ip) -> str | None:
    """Why an address is never probed (metadata, link-local, unspecified), or None."""
    for network in REFUSED_NETWORKS:
        if ip.version == network.version and ip in network:
            return f"{ip}, a cloud metadata, link-local or unspecified address ({network})"
    return None


def _host_name(host: str) -> str:
    name = host.lower().rstrip(".")
    for suffix in SERVICE_SUFFIXES:
        if name.endswith(suffix) and name.count(".") >= suffix.count(".") + 1:
            return name[: -len(suffix)]
    return name


@dataclass(frozen=True)
class HostPattern:
    """One `--allow-target` / `--api-key-target` pattern: a network, or a host name."""

    text: str
    network: ipaddress.IPv4Network | ipaddress.IPv6Network | None = None
    name: str | None = None
    subdomains: bool = False

    @classmethod
    def parse(cls, text: str) -> HostPattern:
        raw = text.strip()
        if not raw:
            raise ValueError("an empty pattern")
        try:
            return cls(raw, network=ipaddress.ip_network(raw, strict=False))
        except ValueError:
            pass
        subdomains = raw.startswith("*.")
        name = _host_name(raw[2:] if subdomains else raw)
        labels = name.split(".")
        if (
            not name
            or "*" in name
            or not all(label and all(c.isalnum() or c == "-" for c in label) for label in labels)
        ):
            raise ValueError(
                f"{raw!r}: expected a CIDR (10.0.0.0/8), an address, a host (vllm.serving) "
                "or *.DOMAIN (*.serving)"
            )
        return cls(raw, name=name, subdomains=subdomains)

    def matches_name(self, host: str) -> bool:
        if self.name is None:
            return False
        name = _host_name(host)
        if self.subdomains:
            return name.endswith("." + self.name)
        return name == self.name

    def matches_address(self, ip) -> bool:
        return (
            self.network is not None and ip.version == self.network.version and ip in self.network
        )


@dataclass(frozen=True)
class Permit:
    """A target the policy allows: by its name (any address but a refused one) or only at the
    addresses it resolved to (each must be in an allowed network)."""

    host: str
    by_name: bool
    send_api_key: bool
    key_by_name: bool = False

    def allows_peer(self, policy: TargetPolicy, peer: str) -> str | None:
        """Why the address a connection reached is refused, or None."""
        ip = _address(peer)
        if ip is None:
            return f"connected to {peer!r}, not an IP address"
        why = refused_address(ip)
        if why:
            return f"{self.host} reached {why}"
        if not self.by_name and not any(p.matches_address(ip) for p in policy.allow):
            return f"{self.host} now resolves to {ip}, which no --allow-target pattern allows"
        if (
            self.send_api_key
            and not self.key_by_name
            and not any(p.matches_address(ip) for p in policy.api_key_for)
        ):
            return f"{self.host} now resolves to {ip}, which no --api-key-target pattern names"
        return None

    def guard(self, policy: TargetPolicy):
        """A function for a requests Session: no proxy, and every connection it opens checked
        against allows_peer before a byte is sent."""

        def prepare(session) -> None:
            session.trust_env = False  # a proxy would hide the address reached
            adapter = _checked_adapter(lambda peer: self.allows_peer(policy, peer))
            session.mount("http://", adapter)
            session.mount("https://", adapter)

        return prepare


def _checked_adapter(check_peer):
    """A requests adapter whose connections refuse a peer address `check_peer` objects to."""
    from requests.adapters import HTTPAdapter
    from urllib3.connection import HTTPConnection, HTTPSConnection
    from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
    from urllib3.exceptions import NewConnectionError

    class Checked:
        def _new_conn(self):
            sock = super()._new_conn()
            why = check_peer(sock.getpeername()[0])
            if why:
                sock.close()
                raise NewConnectionError(self, f"refused by the exporter's policy: {why}")
            return sock

    class Connection(Checked, HTTPConnection):
        pass

    class TlsConnection(Checked, HTTPSConnection):
        pass

    class Pool(HTTPConnectionPool):
        ConnectionCls = Connection

    class TlsPool(HTTPSConnectionPool):
        ConnectionCls = TlsConnection

    class Adapter(HTTPAdapter):
        def init_poolmanager(self, *args, **kwargs):
            super().init_poolmanager(*args, **kwargs)
            self.poolmanager.pool_classes_by_scheme = {"http": Pool, "https": TlsPool}

    return Adapter()


def _resolve(host: str, port: int) -> list[str]:
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return sorted({info[4][0] for info in infos})


@dataclass
class TargetPolicy:
    """The exporter's `--allow-target` and `--api-key-target` patterns."""

    allow: list[HostPattern] = field(
        default_factory=lambda: [HostPattern.parse(p) for p in LOOPBACK_PATTERNS]
    )
    api_key_for: list[HostPattern] = field(default_factory=list)
    resolve: Callable[[str, int], list[str]] = field(default=_resolve, compare=False)

    @classmethod
    def from_patterns(cls, allow: list[str] | None, api_key_for: list[str] | None):
        """ValueError (one line) for a pattern it cannot read."""
        return cls(
            allow=[HostPattern.parse(p) for p in (allow or LOOPBACK_PATTERNS)],
            api_key_for=[HostPattern.parse(p) for p in (api_key_for or [])],
        )

    def _matches(self, patterns: list[HostPattern], host: str, addresses: list) -> bool:
        literal = _address(host)
        if literal is not None:
            return any(p.matches_address(literal) for p in patterns)
        if any(p.matches_name(host) for p in patterns):
            return True
        return bool(addresses) and all(
            any(p.matches_address(ip) for p in patterns) for ip in addresses
        )

    def check(self, host: str, port: int) -> Permit:
        """The Permit for a target host, or TargetRefused saying why."""
        host = host.strip("[]")
        if not host:
            raise TargetRefused("the target names no host")
        if _host_name(host) in METADATA_NAMES:
            raise TargetRefused(f"{host} is a cloud metadata service")
        literal = _address(host)
        if literal is not None:
            addresses = [literal]
        else:
            try:
                addresses = [ip for ip in (_address(a) for a in self.resolve(host, port)) if ip]
            except (OSError, UnicodeError) as exc:
                raise TargetRefused(f"{host} does not resolve ({exc})") from None
            if not addresses:
                raise TargetRefused(f"{host} does not resolve")
        for ip in addresses:
            why = refused_address(ip)
            if why:
                raise TargetRefused(
                    f"{host} is {why}" if literal is not None else f"{host} resolves to {why}"
                )
        by_name = literal is None and any(p.matches_name(host) for p in self.allow)
        if not by_name and not self._matches(self.allow, host, addresses):
            raise TargetRefused(
                f"{host} is not allowed: no --allow-target pattern matches it"
                + ("" if self.allow != TargetPolicy().allow else " (the default allows loopback)")
            )
        key_by_name = literal is None and any(p.matches_name(host) for p in self.api_key_for)
        send_key = key_by_name or self._matches(self.api_key_for, host, addresses)
        return Permit(host, by_name, send_key, key_by_name)
