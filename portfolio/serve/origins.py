"""Which Host and Origin headers the service answers (`AllowList`): a defence against DNS rebinding (a web page
whose name was re-pointed at the server sends its own name as Host) and against cross-site requests from a
browser (which name their page in Origin).

The allowed names default to the bind address, localhost, 127.0.0.1 and ::1; `portfolio serve --allowed-host
NAME` (repeatable) adds the names clients reach the server by. A name is matched whatever the port. A request
without Origin (any client that is not a browser) is judged by its Host alone. The MCP endpoint is given the same
list for the MCP SDK's own check (`transport_security`), on whatever address the server listens.
"""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import urlsplit

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")


def normal_name(text: str) -> str:
    """A host name or address as compared: lower case, an IPv6 address without brackets, no port."""
    text = text.strip().lower()
    if text.startswith("["):
        return text[1 : text.index("]")] if "]" in text else text[1:]
    if text.count(":") == 1:  # name:port (an IPv6 address has several colons)
        return text.split(":", 1)[0]
    return text


def is_loopback(host: str) -> bool:
    import ipaddress

    name = normal_name(host)
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


class AllowList:
    """The host names a request's Host (and, when it has one, its Origin) must name."""

    def __init__(self, bind: str, extra: Iterable[str] = ()) -> None:
        names = [normal_name(n) for n in (bind, *LOOPBACK_NAMES, *extra)]
        self.names = tuple(dict.fromkeys(n for n in names if n))

    def host_ok(self, host: bytes | None) -> bool:
        return host is not None and normal_name(host.decode("latin-1")) in self.names

    def origin_ok(self, origin: bytes | None) -> bool:
        if origin is None:
            return True
        try:
            parts = urlsplit(origin.decode("latin-1").strip())
            name = parts.hostname
        except ValueError:
            return False
        return parts.scheme in ("http", "https") and name is not None and normal_name(name) in self.names

    def transport_security(self):
        """The MCP SDK's DNS-rebinding settings for the same names, any port."""
        from mcp.server.transport_security import TransportSecuritySettings

        spelled = [f"[{n}]" if ":" in n else n for n in self.names]
        return TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=[h for n in spelled for h in (n, f"{n}:*")],
            allowed_origins=[f"{s}://{n}{p}" for n in spelled for s in ("http", "https") for p in ("", ":*")],
        )
