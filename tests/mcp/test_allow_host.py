"""`serve --http --allow-host HOST`: a request whose Host header names a
server by a name other than loopback (a Kubernetes Service, a balancer's
name) is served only when that name was allowed, with or without a port."""

from __future__ import annotations

from pathlib import Path

from front_door import Client
from toolhost_mcp import http_server


def test_only_allowed_host_names_are_served(workdir: Path, cache_dir: Path) -> None:
    with http_server(("text_tools",), workdir, cache_dir, flags=["--allow-host", "toolhost.example.svc"]) as server:
        client = Client(server.url)
        try:
            request = {
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
            }
            for host, status in [("toolhost.example.svc:8080", 200), ("toolhost.example.svc", 200), ("elsewhere.example", 403)]:
                reply = client.post(request, {"host": host})
                assert reply.status == status, f"Host {host}: {reply.status} {reply.body[:300]!r}"
        finally:
            client.close()
