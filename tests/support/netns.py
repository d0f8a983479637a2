"""Hosts really apart on one machine: one network namespace per host, joined by a bridge.

Each host gets a namespace ``llm-<id>-<host>`` with ``lo`` and ``eth0`` (one end of a veth pair,
address ``10.231.0.N/24``); the other ends are ports of bridge ``br0`` in a namespace of its own,
``llm-<id>-bridge``: a switch with a cable per host. ``<id>`` is ``<pid>x<n>``, unique per
topology, so parallel runs never clash (and the same addresses in two topologies never meet:
their namespaces share nothing).

Why the bridge has a namespace of its own rather than the root one: nothing in the machine's
own network changes (no interface, address, route or forwarding setting in the root namespace),
so a bug here cannot touch the machine's real traffic; the hosts have no default route and
nothing but each other to talk to; and deleting the namespaces removes every link with them
(a veth pair dies with either end's namespace), so teardown cannot leave a link behind.

Teardown (on leaving the ``with``, on an exception, on Ctrl-C, on SIGTERM, at interpreter exit)
ends the processes started here (each in its own session: TERM, then KILL), then any other
process still inside one of its namespaces, then deletes the namespaces. A run killed with
SIGKILL leaves its namespaces behind; the next topology sweeps those whose pid is dead
(``python -m tests.support.netns --sweep`` does it by hand). Every wait is bounded.

Usage::

    from tests.support.netns import Topology, wait_for_text

    with Topology(["master", "w1", "w2", "mock"]) as topo:
        mock = topo.popen("mock", [sys.executable, "-m", "llmload.cli", "mock", "--host", topo.addr("mock")])
        wait_for_text(mock.log_path, "listening on", timeout=15)
        topo.partition("w1")      # unplug w1's cable at the switch: its packets silently vanish
        topo.heal("w1")           # plug it back
        topo.cut("w1", "master")  # only w1 <-> master goes silent; w1 still reaches the mock
        topo.uncut("w1", "master")
        topo.link_counters("w1")  # {"rx_bytes": ..., "tx_bytes": ..., "rx_packets": ..., ...}

``Topology`` raises :class:`NetnsUnavailable` where namespaces cannot be made (not root, no
``ip``, ``unshare`` denied, no veth/bridge support); tests turn that into ``pytest.skip``.
"""

from __future__ import annotations

import atexit
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Sequence
from typing import Any

PREFIX = "llm-"
BRIDGE = "bridge"
IP_TIMEOUT_S = 10.0
TERM_GRACE_S = 5.0
KILL_WAIT_S = 5.0

_HOST_RE = re.compile(r"^[a-z][a-z0-9]{0,11}$")  # bridge-side port "v-<host>" fits IFNAMSIZ (15)
NS_RE = re.compile(r"^llm-(\d+)x(\d+)-([a-z][a-z0-9]{0,11})$")
_seq = 0
_live: list[Topology] = []
_old_sigterm: Any = None


class NetnsUnavailable(RuntimeError):
    """Network namespaces cannot be made here; the message says why."""


SPAWNED = ("All users spawned", "Spawning is complete")
"""What a Locust master logs once its users run; the second when a worker's report was late (a
loaded machine): the users run all the same."""


def wait_for_text(path: str, text: str | tuple[str, ...], timeout: float, proc: subprocess.Popen | None = None) -> str:
    """Wait (bounded) until the file at ``path`` contains ``text`` (or any of a tuple); return its
    content. Fails early, with the file's tail, when ``proc`` exits first."""
    texts = (text,) if isinstance(text, str) else text
    deadline = time.monotonic() + timeout
    while True:
        try:
            with open(path, errors="replace") as f:
                content = f.read()
        except FileNotFoundError:
            content = ""
        if any(t in content for t in texts):
            return content
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"{path}: process exited ({proc.returncode}) before printing {text!r}:\n"
                               f"{content[-3000:]}")
        if time.monotonic() >= deadline:
            raise TimeoutError(f"{path}: no {text!r} within {timeout} s:\n{content[-3000:]}")
        time.sleep(0.05)


def _ip(*args: str, timeout: float = IP_TIMEOUT_S, check: bool = True) -> subprocess.CompletedProcess:
    res = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=timeout)
    if check and res.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {res.stderr.strip() or res.stdout.strip()}")
    return res


def namespaces() -> list[str]:
    """Every namespace name ``ip netns list`` shows."""
    out = _ip("netns", "list").stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def pid_alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie, killed but not yet reaped by its parent, is dead)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def _ns_pids(ns: str) -> list[int]:
    res = _ip("netns", "pids", ns, check=False)
    return [int(p) for p in res.stdout.split() if p.isdigit()]


def _empty_namespace(ns: str) -> None:
    """SIGKILL whatever still runs inside ``ns`` (only processes started in our namespaces);
    wait, bounded, until none is left."""
    deadline = time.monotonic() + KILL_WAIT_S
    while (pids := _ns_pids(ns)) and time.monotonic() < deadline:
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.05)
    if pids:
        raise RuntimeError(f"netns {ns}: processes {pids} still inside after {KILL_WAIT_S} s")


def _delete_namespace(ns: str) -> None:
    _empty_namespace(ns)
    res = _ip("netns", "del", ns, check=False)
    if res.returncode != 0 and ns in namespaces():
        raise RuntimeError(f"ip netns del {ns}: {res.stderr.strip()}")


def sweep_stale() -> list[str]:
    """Delete namespaces left by topologies whose process is gone (a run killed with SIGKILL).
    Only names of our own pattern whose pid is dead are touched. Returns what was deleted."""
    stale = [ns for ns in namespaces() if (m := NS_RE.match(ns)) and not pid_alive(int(m.group(1)))]
    # Hosts first, the bridge last, as in a normal teardown (either order leaves nothing).
    stale.sort(key=lambda ns: ns.endswith("-" + BRIDGE))
    for ns in stale:
        _delete_namespace(ns)
    return stale


def probe() -> str | None:
    """Why namespaces cannot be used here, or None when they (probably) can."""
    if os.geteuid() != 0:
        return f"network namespaces need root (euid is {os.geteuid()})"
    if shutil.which("ip") is None:
        return "no `ip` command (iproute2) on PATH"
    return None


class Topology:
    """Namespaces ``llm-<id>-<host>`` for each host, cabled to one bridge (see the module doc)."""

    def __init__(self, hosts: Sequence[str], subnet: str = "10.231.0", log_dir: str | None = None) -> None:
        global _seq
        hosts = list(hosts)
        if not hosts or len(set(hosts)) != len(hosts) or len(hosts) > 250:
            raise ValueError(f"Topology: expected 1-250 distinct host names, got {hosts!r}")
        for h in hosts:
            if not _HOST_RE.match(h) or h == BRIDGE:
                raise ValueError(f"Topology: host name {h!r}: expected [a-z][a-z0-9]{{0,11}}, not {BRIDGE!r}")
        self.hosts = hosts
        self.subnet = subnet
        self.id = f"{os.getpid()}x{_seq}"
        _seq += 1
        self.log_dir = log_dir
        self._own_log_dir = False
        self._addrs = {h: f"{subnet}.{i + 1}" for i, h in enumerate(hosts)}
        self._made: list[str] = []  # namespaces created so far, in order
        self._procs: list[subprocess.Popen] = []
        self._cuts: set[tuple[str, str]] = set()  # (src, dst): src's packets to dst are dropped
        self._closed = False
        self.setup_s = 0.0
        self.teardown_s = 0.0

    # -- names ---------------------------------------------------------------------------------
    def ns(self, host: str) -> str:
        """The namespace name of ``host`` (or of the bridge, ``"bridge"``)."""
        if host != BRIDGE and host not in self._addrs:
            raise KeyError(f"Topology {self.id}: no host {host!r} (hosts: {', '.join(self.hosts)})")
        return f"{PREFIX}{self.id}-{host}"

    def addr(self, host: str) -> str:
        """``host``'s IPv4 address on the bridge."""
        self.ns(host)
        return self._addrs[host]

    def port(self, host: str) -> str:
        """``host``'s cable end on the bridge (in the bridge's namespace)."""
        self.ns(host)
        return f"v-{host}"

    # -- life ----------------------------------------------------------------------------------
    def __enter__(self) -> Topology:
        self.start()
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        try:
            self.close()
        except Exception as e:
            if exc_type is None:
                raise
            print(f"tests.support.netns: {e}", file=sys.stderr)  # the body's own error is the one to raise

    def start(self) -> None:
        if self._made or self._closed:
            raise RuntimeError(f"Topology {self.id}: start() once per topology")
        reason = probe()
        if reason:
            raise NetnsUnavailable(reason)
        t0 = time.perf_counter()
        sweep_stale()
        _track(self)
        if self.log_dir is None:
            self.log_dir = tempfile.mkdtemp(prefix=f"llm-netns-{self.id}-")
            self._own_log_dir = True
        try:
            self._build()
        except BaseException:
            self.close()
            raise
        self.setup_s = time.perf_counter() - t0

    def _add_ns(self, host: str) -> str:
        ns = self.ns(host)
        res = _ip("netns", "add", ns, check=False)
        if res.returncode != 0:
            raise _failure(f"ip netns add {ns}", res)
        self._made.append(ns)
        # Quiet links: no IPv6 (router solicitations, DAD), so counters count our traffic.
        self._sysctl(ns, "net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1")
        _ip("-n", ns, "link", "set", "lo", "up")
        return ns

    @staticmethod
    def _sysctl(ns: str, *settings: str) -> None:
        # Written through /proc inside the namespace: sysctl(8) may be missing.
        script = "; ".join(f"echo {v} > /proc/sys/{k.replace('.', '/')}" for k, v in (s.split("=") for s in settings))
        _ip("netns", "exec", ns, "sh", "-c", script)

    def _build(self) -> None:
        br = self._add_ns(BRIDGE)
        res = _ip("-n", br, "link", "add", "br0", "type", "bridge", check=False)
        if res.returncode != 0:
            raise _failure("cannot make a bridge", res)
        _ip("-n", br, "link", "set", "br0", "up")
        for host in self.hosts:
            ns = self._add_ns(host)
            # Made inside the host's namespace with the peer straight in the bridge's: neither
            # end ever appears in the root namespace, not even for a moment.
            res = _ip("-n", ns, "link", "add", "eth0", "type", "veth", "peer", "name", self.port(host),
                      "netns", br, check=False)
            if res.returncode != 0:
                raise _failure("cannot make a veth pair", res)
            _ip("-n", br, "link", "set", self.port(host), "master", "br0")
            _ip("-n", br, "link", "set", self.port(host), "up")
            _ip("-n", ns, "addr", "add", f"{self.addr(host)}/24", "dev", "eth0")
            _ip("-n", ns, "link", "set", "eth0", "up")

    def close(self) -> None:
        """End every process and delete every namespace of this topology (idempotent)."""
        if self._closed:
            return
        self._closed = True
        t0 = time.perf_counter()
        errors: list[str] = []
        try:
            self._stop_procs()
        except Exception as e:  # still delete the namespaces
            errors.append(f"stopping processes: {e}")
        # Hosts first, bridge last (either order would do: a veth dies with either end).
        for ns in sorted(self._made, key=lambda n: n.endswith("-" + BRIDGE)):
            try:
                _delete_namespace(ns)
            except Exception as e:
                errors.append(str(e))
        left = [ns for ns in namespaces() if ns in self._made]
        if left:
            errors.append(f"namespaces left: {left}")
        self._made = []
        _untrack(self)
        if self._own_log_dir and not errors and self.log_dir and os.environ.get("LLMLOAD_KEEP_NETNS_LOGS") != "1":
            shutil.rmtree(self.log_dir, ignore_errors=True)
        self.teardown_s = time.perf_counter() - t0
        if errors:
            raise RuntimeError(f"Topology {self.id} teardown: " + "; ".join(errors))

    def _stop_procs(self) -> None:
        alive = [p for p in self._procs if p.poll() is None]
        for p in alive:
            _signal_group(p, signal.SIGTERM)
        deadline = time.monotonic() + TERM_GRACE_S
        while any(p.poll() is None for p in alive) and time.monotonic() < deadline:
            time.sleep(0.05)
        for p in self._procs:
            # Only while not reaped (its pid cannot be reused yet); children it left behind in
            # our namespaces are killed with the namespace.
            if p.poll() is None:
                _signal_group(p, signal.SIGKILL)
            try:
                p.wait(KILL_WAIT_S)
            except subprocess.TimeoutExpired as e:
                raise RuntimeError(f"pid {p.pid} did not die on SIGKILL within {KILL_WAIT_S} s") from e

    # -- processes -----------------------------------------------------------------------------
    def popen(self, host: str, cmd: Sequence[str], env: dict[str, str] | None = None,
              log_path: str | None = None, **kw: Any) -> subprocess.Popen:
        """Start ``cmd`` inside ``host``'s namespace, in a session of its own. Unless ``stdout`` is
        given, stdout and stderr go to ``log_path`` (default: a file in ``log_dir``), set as the
        returned process's ``log_path``. Teardown ends it."""
        if self._closed or not self._made:
            raise RuntimeError(f"Topology {self.id}: not started or already closed")
        ns = self.ns(host)
        kw.setdefault("start_new_session", True)
        argv = ["ip", "netns", "exec", ns, *cmd]
        if "stdout" in kw:
            proc = subprocess.Popen(argv, env=env, **kw)
        else:
            if log_path is None:
                log_path = os.path.join(self.log_dir, f"{host}-{len(self._procs)}.log")
            kw.setdefault("stderr", subprocess.STDOUT)
            with open(log_path, "ab") as log:  # the child keeps its own copy
                proc = subprocess.Popen(argv, env=env, stdout=log, **kw)
        proc.log_path = log_path  # type: ignore[attr-defined]
        proc.host = host  # type: ignore[attr-defined]
        self._procs.append(proc)
        return proc

    def run(self, host: str, cmd: Sequence[str], timeout: float = 10.0) -> subprocess.CompletedProcess:
        """Run ``cmd`` inside ``host``'s namespace to completion (bounded); output captured."""
        return subprocess.run(["ip", "netns", "exec", self.ns(host), *cmd], capture_output=True, text=True,
                              timeout=timeout)

    # -- the network ---------------------------------------------------------------------------
    def partition(self, host: str) -> None:
        """Unplug ``host``'s cable at the switch: its bridge port goes down, so frames to and from
        it are dropped silently, as on a real network (its own eth0 sees NO-CARRIER but keeps its
        address and route, so sends do not fail fast with "network unreachable")."""
        _ip("-n", self.ns(BRIDGE), "link", "set", self.port(host), "down")

    def heal(self, host: str) -> None:
        """Plug ``host``'s cable back in (no STP on the bridge: the port forwards at once)."""
        _ip("-n", self.ns(BRIDGE), "link", "set", self.port(host), "up")

    def cut(self, a: str, b: str) -> None:
        """Drop IPv4 packets between ``a`` and ``b`` at the switch, silently, both ways; each
        keeps talking to every other host (a partial partition: e.g. a worker that still reaches
        the server but not the master). Needs ``tc`` (no netem: an htb class whose qdisc is
        ``blackhole``, chosen by a u32 match on the source address; installed only while cut)."""
        if (a, b) in self._cuts or (b, a) in self._cuts:
            return
        for src, dst in ((a, b), (b, a)):
            dev = self.port(dst)
            if not any(d == dst for _, d in self._cuts):
                self._tc("qdisc", "add", "dev", dev, "root", "handle", "1:", "htb", "default", "1")
                for cls in ("1:1", "1:2"):
                    self._tc("class", "add", "dev", dev, "parent", "1:", "classid", cls, "htb", "rate", "100gbit",
                             "quantum", "60000")
                self._tc("qdisc", "add", "dev", dev, "parent", "1:2", "handle", "20:", "blackhole")
            self._tc("filter", "add", "dev", dev, "parent", "1:", "protocol", "ip", "prio", str(self._prio(src)),
                     "u32", "match", "ip", "src", f"{self.addr(src)}/32", "flowid", "1:2")
            self._cuts.add((src, dst))

    def uncut(self, a: str, b: str) -> None:
        """Undo :meth:`cut` (both ways)."""
        for src, dst in ((a, b), (b, a)):
            if (src, dst) not in self._cuts:
                continue
            self._cuts.discard((src, dst))
            dev = self.port(dst)
            if any(d == dst for _, d in self._cuts):
                self._tc("filter", "del", "dev", dev, "parent", "1:", "prio", str(self._prio(src)))
            else:
                self._tc("qdisc", "del", "dev", dev, "root")

    def _prio(self, host: str) -> int:
        return self.hosts.index(host) + 1

    def _tc(self, *args: str) -> None:
        if shutil.which("tc") is None:
            raise RuntimeError("Topology.cut needs `tc` (iproute2)")
        res = subprocess.run(["tc", "-n", self.ns(BRIDGE), *args], capture_output=True, text=True,
                             timeout=IP_TIMEOUT_S)
        if res.returncode != 0:
            raise RuntimeError(f"tc {' '.join(args)}: {res.stderr.strip()}")

    def link_counters(self, host: str) -> dict[str, int]:
        """Bytes and packets through ``host``'s eth0: rx_bytes, tx_bytes, rx_packets, tx_packets."""
        return _counters(self.ns(host), "eth0")

    def port_counters(self, host: str) -> dict[str, int]:
        """The same for ``host``'s port on the bridge (rx there = what ``host`` sent)."""
        return _counters(self.ns(BRIDGE), self.port(host))

    def routes(self, host: str) -> list[dict[str, Any]]:
        """``host``'s IPv4 routing table (``ip -j route show table all``)."""
        return json.loads(_ip("-n", self.ns(host), "-4", "-j", "route", "show", "table", "all").stdout)

    def links(self, host: str) -> list[str]:
        """Interface names inside ``host``'s namespace."""
        return [link["ifname"] for link in json.loads(_ip("-n", self.ns(host), "-j", "link", "show").stdout)]


def _failure(what: str, res: subprocess.CompletedProcess) -> Exception:
    # Denied or unsupported: this machine cannot do it (skip); anything else is a bug (fail).
    err = res.stderr.strip()
    if any(s in err for s in ("not permitted", "Permission denied", "not supported", "Unknown device type")):
        return NetnsUnavailable(f"{what}: {err}")
    return RuntimeError(f"{what}: {err}")


def _counters(ns: str, dev: str) -> dict[str, int]:
    s = json.loads(_ip("-n", ns, "-j", "-s", "link", "show", "dev", dev).stdout)[0]["stats64"]
    return {f"{d}_{k}": s[d][k] for d in ("rx", "tx") for k in ("bytes", "packets")}


def _signal_group(p: subprocess.Popen, sig: int) -> None:
    # Our processes lead their own session (start_new_session): the group id is their pid.
    try:
        os.killpg(p.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _raise_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def _track(topo: Topology) -> None:
    # While a topology lives, SIGTERM (a CI runner cancelling) unwinds like Ctrl-C, so the `with`
    # still cleans up; a handler someone else installed is left alone.
    global _old_sigterm
    if not _live and threading.current_thread() is threading.main_thread() \
            and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        _old_sigterm = signal.signal(signal.SIGTERM, _raise_interrupt)
    _live.append(topo)


def _untrack(topo: Topology) -> None:
    global _old_sigterm
    if topo in _live:
        _live.remove(topo)
    if not _live and _old_sigterm is not None and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _old_sigterm)
        _old_sigterm = None


@atexit.register
def _close_live() -> None:
    for topo in list(_live):
        try:
            topo.close()
        except Exception as e:
            print(f"tests.support.netns: {e}")


def leftovers(topo_ids: Iterable[str] = ()) -> list[str]:
    """Namespaces of the given topologies (default: of this process) still listed."""
    ids = set(topo_ids) or None
    out = []
    for ns in namespaces():
        m = NS_RE.match(ns)
        if m and (f"{m.group(1)}x{m.group(2)}" in ids if ids else int(m.group(1)) == os.getpid()):
            out.append(ns)
    return out


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description="network namespace topologies for llmload's tests")
    ap.add_argument("--sweep", action="store_true", help="delete namespaces left by runs that are gone")
    ap.add_argument("--selftest", action="store_true", help="build and tear down a 4-host topology, timed")
    a = ap.parse_args()
    if a.sweep:
        print("deleted:", " ".join(sweep_stale()) or "nothing")
    if a.selftest:
        with Topology(["master", "w1", "w2", "mock"]) as t:
            print({h: t.addr(h) for h in t.hosts}, t.links("w1"), t.routes("w1"))
        print(f"setup {t.setup_s * 1000:.0f} ms, teardown {t.teardown_s * 1000:.0f} ms, left: {leftovers([t.id])}")
