"""Is anything listening at a server's URL? One TCP connect, before any work.

A run against a model server that is down used to spend its first rollouts (and, with
retries, about a minute) finding out. ``unreachable`` opens one connection to the URL's host
and port and closes it: no HTTP request is sent, so a server that counts or bills requests
sees nothing. It answers only "can a connection be made"; a server that accepts and then
answers errors is the rollouts' business.
"""

from __future__ import annotations

import socket
import urllib.parse
import urllib.request

#: Seconds one connect may take. A server on the same network answers in milliseconds; a
#: hosted API in well under a second; a blackholed address never (the run would have
#: waited ``connect`` timeouts per rollout).
PROBE_TIMEOUT_S = 5.0


def unreachable(url: str, timeout: float = PROBE_TIMEOUT_S) -> str | None:
    """Why nothing can be reached at ``url`` (``"connection refused"``, ``"no answer within
    5 s"``, ``"host not found"``), or None when a connection opened, or when it cannot be
    told: a proxy from the environment carries the requests (the proxy is what a direct
    connect would not see), or the URL has no host. Never raises."""
    try:
        parts = urllib.parse.urlsplit(url)
        host = parts.hostname
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return None
    if not host or _proxied(parts.scheme, host):
        return None
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return None
    except socket.gaierror:
        return f"host {host!r} not found"
    except TimeoutError:
        return f"no answer within {timeout:g} s"
    except ConnectionRefusedError:
        return "connection refused: nothing listens on that port"
    except OSError as exc:
        return exc.strerror or type(exc).__name__


def _proxied(scheme: str, host: str) -> bool:
    """True when an ``http(s)_proxy`` variable would carry requests to ``host``."""
    proxies = urllib.request.getproxies()
    if scheme not in proxies and "all" not in proxies:
        return False
    try:
        return not urllib.request.proxy_bypass(host)
    except OSError:
        return True
