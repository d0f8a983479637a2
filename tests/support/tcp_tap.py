"""A TCP relay on 127.0.0.1 that keeps a copy of every byte it passes, both ways: put between
Locust workers and their master, it holds the whole ZeroMQ traffic (ZMTP frames carry msgpack,
where every string is its plain UTF-8 bytes).

Runs in its own process; the copy goes to a file, at most 256 MiB.

Usage::

    proc, port = start_process(upstream_port, capture_path)   # workers: --master-port port
    data = open(capture_path, "rb").read()
"""

from __future__ import annotations

import socket
import subprocess
import sys
import threading

LIMIT = 256 << 20


def _pump(src: socket.socket, dst: socket.socket, out, lock: threading.Lock, kept: list[int]) -> None:
    try:
        while data := src.recv(65536):
            with lock:
                if kept[0] < LIMIT:
                    out.write(data)
                    kept[0] += len(data)
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def serve(upstream_port: int, capture_path: str) -> None:
    srv = socket.create_server(("127.0.0.1", 0))
    print(f"listening on {srv.getsockname()[1]}", flush=True)
    lock, kept = threading.Lock(), [0]
    with open(capture_path, "ab", buffering=0) as out:
        while True:
            conn, _ = srv.accept()
            try:
                up = socket.create_connection(("127.0.0.1", upstream_port), timeout=10)
            except OSError:
                conn.close()  # the master is not up yet: the worker's ZeroMQ socket tries again
                continue
            up.settimeout(None)
            for a, b in ((conn, up), (up, conn)):
                threading.Thread(target=_pump, args=(a, b, out, lock, kept), daemon=True).start()


def start_process(upstream_port: int, capture_path: str) -> tuple[subprocess.Popen, int]:
    proc = subprocess.Popen([sys.executable, __file__, str(upstream_port), capture_path], stdout=subprocess.PIPE,
                            text=True)
    line = proc.stdout.readline() if proc.stdout else ""
    if "listening on" not in line:
        proc.kill()
        raise RuntimeError(f"tcp tap did not start: {line!r}")
    return proc, int(line.rsplit(" ", 1)[1])


if __name__ == "__main__":
    serve(int(sys.argv[1]), sys.argv[2])
