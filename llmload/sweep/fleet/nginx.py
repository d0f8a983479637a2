"""nginx as a fleet's router: the config llmload writes from the plan, and how it is run. The text
is pure; :func:`binary` looks for Debian's package.

nginx runs as a child process (``daemon off``) on 127.0.0.1 with everything of its own in the
cell's router folder (``-p DIR -c DIR/nginx.conf -e DIR/error.log``: pid, logs, temp files), so the
system's nginx config and port 80 are never touched. One worker; responses are not buffered
(``proxy_buffering off``: a stream reaches the client token by token); HTTP/1.1 with kept-alive
connections to the replicas; a request a replica refuses goes to the next one (``proxy_next_upstream
error timeout``), a stream it cut is not retried, and nginx never takes a replica out of the upstream
(``max_fails=0``): with ``max_fails=1`` one "upstream prematurely closed connection" of a llama.cpp
replica took it out for 10 s, and its share of the step with it, and with both out a cell had
11,932 of its 11,996 requests answered 502 "no live upstreams". A load test sees each replica's own
answers, not nginx's circuit breaker. Each response says which replica served it (``X-Llmload-Upstream``), which the
routing check before the first step reads.

Policies: ``round_robin`` (the upstream's default, weights equal), ``least_conn``, ``random``, and
``affinity``: ``hash`` on the header llmload sends with ``--affinity-headers``
(``X-Llmload-Session-Id``, or ``X-Llmload-Prefix-Id`` with ``affinity_key: prefix``; not
``consistent``, so each key's replica is ``((crc32(key) >> 16) & 0x7fff) % K``).

Usage::

    text = config_text(["127.0.0.1:8001", "127.0.0.1:8002"], 9000, "least_conn", "session", "/tmp/r")
    command("/tmp/r")     # ["/usr/sbin/nginx", "-p", "/tmp/r", "-c", "/tmp/r/nginx.conf", "-e", ...]
"""

from __future__ import annotations

import getpass
import os
import shutil

from llmload.workload.affinity import PREFIX_HEADER, SESSION_HEADER

POLICIES = {"round_robin": "round-robin", "least_conn": "least_conn", "random": "random",
            "affinity": "hash $http_x_llmload_session_id"}
UPSTREAM_HEADER = "X-Llmload-Upstream"
HEALTH_PATH = "/llmload-router-health"
INSTALL = "apt-get install -y nginx"
CONF = "nginx.conf"


def binary() -> str | None:
    """Debian's nginx (``/usr/sbin`` is not on every user's PATH)."""
    return shutil.which("nginx") or next((p for p in ("/usr/sbin/nginx", "/usr/local/sbin/nginx")
                                          if os.access(p, os.X_OK)), None)


def install_problem() -> str | None:
    if binary() is None:
        return f"nginx is not installed: {INSTALL} (Debian's package; llmload runs it itself, on 127.0.0.1)"
    return None


def _variable(header: str) -> str:
    return "$http_" + header.lower().replace("-", "_")


def balancing(policy: str, affinity_key: str) -> str:
    """The upstream block's balancing directive ('' for round-robin, nginx's default)."""
    if policy == "least_conn":
        return "least_conn;"
    if policy == "random":
        return "random;"
    if policy == "affinity":
        return f"hash {_variable(PREFIX_HEADER if affinity_key == 'prefix' else SESSION_HEADER)};"
    return ""


def config_text(upstreams: list[str], port: int, policy: str, affinity_key: str, folder: str) -> str:
    """The whole nginx.conf: ``upstreams`` as host:port, listening on 127.0.0.1:``port``."""
    user = f"user {getpass.getuser()};\n" if os.geteuid() == 0 else ""  # workers as the caller, not nobody
    servers = "\n".join(f"        server {u} max_fails=0;" for u in upstreams)
    method = balancing(policy, affinity_key)
    temp = "\n".join(f"    {name}_temp_path {folder}/{name}_temp;" for name in
                     ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    return f"""# written by llmload sweep: a fleet of {len(upstreams)} behind nginx, policy {policy}
{user}daemon off;
master_process on;
worker_processes 1;
pid {folder}/nginx.pid;
error_log {folder}/error.log warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
{temp}
    client_max_body_size 64m;
    client_body_buffer_size 1m;
    upstream llmload_fleet {{
        {method}
{servers}
        keepalive 64;
    }}
    server {{
        listen 127.0.0.1:{port};
        location = {HEALTH_PATH} {{ return 200 "ok\\n"; }}
        location / {{
            proxy_pass http://llmload_fleet;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
            proxy_request_buffering off;
            proxy_read_timeout 600s;
            proxy_send_timeout 600s;
            proxy_next_upstream error timeout;
            add_header {UPSTREAM_HEADER} $upstream_addr always;
        }}
    }}
}}
"""


def command(folder: str) -> list[str]:
    exe = binary()
    assert exe is not None, install_problem()
    return [exe, "-p", folder, "-c", os.path.join(folder, CONF), "-e", os.path.join(folder, "error.log")]


def upstream_of(headers: dict[str, str]) -> str | None:
    """host:port of the replica that served a response (the last one nginx tried)."""
    value = headers.get(UPSTREAM_HEADER.lower())
    return value.split(",")[-1].strip() if value else None


def hash_replica(key: str, replicas: int) -> int:
    """The replica (0-based) nginx's non-consistent ``hash`` sends ``key`` to, every replica up:
    ngx_http_upstream_hash_module's ``((crc32(key) >> 16) & 0x7fff) % total weight``."""
    import zlib

    return ((zlib.crc32(key.encode()) >> 16) & 0x7FFF) % replicas
