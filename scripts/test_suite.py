"""``make test``: the suite's tiers one after another, with the builds and installs beside them.

The tiers (tests/conftest.py says which test is in which; docs/architecture.md, "The test suite"):

1. **side**: every test but the ``timing`` ones, in N pytest processes at once that take the
   next test no other has taken (tests/support/shards.py); the tests of one shared server run in
   one process. The suite waits far more than it computes (load steps, streams the mock paces), so
   more processes than cores pay.
2. **alone**: the ``timing`` tests, one at a time, with nothing of the suite's beside them.
3. **last**: tests/test_leftovers.py, once the builds are done: nothing the run started is alive.

What the tests need built or installed (llama-server, vLLM, LiteLLM's proxy) is prepared beside the first tier at
idle priority (SCHED_IDLE: it gets a core only when no test wants one); the tests that need it are
taken only once it has ended (their ``prepared_by`` marker, tests/support/shards.py), so no process
sits waiting on a compile while other tests are left, and a test started by hand waits on its lock
(scripts/llama_server.py, scripts/vllm_server.py). A failed preparation fails the run.

Every tier runs even when one before it failed; the exit code is 1 if anything failed. Each pytest
process's output is in ``build/suite/``, its JUnit file beside it; a ``--junitxml=PATH`` in
``PYTEST_ADDOPTS`` gets them all merged. The last line is the whole run's count.

    python scripts/test_suite.py                         # the three tiers (make test)
    python scripts/test_suite.py --tiers side -- tests/e2e/test_sweep.py
    python scripts/test_suite.py -n 3                    # 3 processes side by side
    python scripts/test_suite.py --save-durations        # tests/durations.json from the last run
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "build" / "suite"
DURATIONS = ROOT / "tests" / "durations.json"
RUN_VAR = "LLMLOAD_TEST_RUN"  # tests/support/leftovers.py: the mark on every process the run starts
SHARDS_VAR = "LLMLOAD_SHARDS"  # tests/support/shards.py
SHARD_INDEX_VAR = "LLMLOAD_SHARD_INDEX"
SHARD_COUNT_VAR = "LLMLOAD_SHARD_COUNT"
PREPARED_VAR = "LLMLOAD_PREPARED"  # tests/support/shards.py: NAME.pending, then NAME.done, per preparation
PROCESSES = 3  # side by side when other work holds CPU (docs/architecture.md, "The test suite": why)
PROCESSES_QUIET = 4  # when the cores are free: the tests wait far more than they compute
OTHERS_BUSY_CORES = 0.5  # other processes' CPU, in cores, from which the machine is not quiet
PROGRESS_EVERY_S = 60.0
SAVE_OVER_S = 2.0  # --save-durations keeps the tests at least this long (the rest keep the files' order)

# (name, script and its arguments): started beside the first tier when the script is in the repository
PREPARATIONS = (
    ("llama-server build", ("scripts/llama_server.py", "build")),
    ("vLLM install", ("scripts/vllm_server.py", "install")),
    ("LiteLLM install", ("llmload/sweep/fleet/litellm.py", "install")),
)
# The alone tier's servers, started once their install is done, during the side tier at idle priority
# (a start there is the whole suite's wall time: ~30 s quiet); the module that needs one adopts it
# (tests/support/vllm.py, "a server started ahead"), and the suite stops any left before the last tier.
AHEAD = {"vLLM install": ("-m", "tests.support.vllm", "prelaunch", "small")}
PREPARATIONS_BY_NAME = {name: script for name, (script, *_args) in PREPARATIONS}


@dataclass(frozen=True)
class Tier:
    name: str
    marks: str
    what: str
    processes: int = 1


def tiers(processes: int) -> dict[str, Tier]:
    return {t.name: t for t in (
        Tier("side", "not timing and not last", f"every test but the timing ones, {processes} processes at once",
             processes),
        Tier("alone", "timing and not last", "the timing tests, one at a time"),
        Tier("last", "last", "nothing the run started is left"),
    )}


def others_cpu_cores(seconds: float = 2.0) -> float | None:
    """How many cores the machine's other processes kept busy over ``seconds`` (this one sleeps
    meanwhile), from /proc/stat; None where there is none."""
    def busy_total() -> tuple[int, int]:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
        return sum(fields) - idle, sum(fields)

    try:
        b0, t0 = busy_total()
        time.sleep(seconds)
        b1, t1 = busy_total()
    except (OSError, ValueError, IndexError):
        return None
    return (b1 - b0) / max(1, t1 - t0) * (os.cpu_count() or 1)


def side_processes() -> tuple[int, str]:
    """The side tier's process count, and why: four on a quiet machine, three when other work holds
    half a core or more (a busy-loop run at four failed 12 timing-bound tests on 2026-12-02)."""
    others = others_cpu_cores()
    if others is None or others >= OTHERS_BUSY_CORES:
        return PROCESSES, ("other processes keep " + (f"{others:.1f} cores" if others is not None else "an unknown "
                                                      "share of the cores") + " busy")
    return PROCESSES_QUIET, f"the cores are free (other processes {others:.1f} cores)"


def idle_prefix() -> list[str]:
    """SCHED_IDLE where allowed, else the lowest nice."""
    if shutil.which("chrt") and subprocess.run(["chrt", "--idle", "0", "true"], capture_output=True).returncode == 0:
        return ["chrt", "--idle", "0"]
    return ["nice", "-n", "19"]


@dataclass
class Preparation:
    name: str
    proc: subprocess.Popen
    log: Path
    started: float = field(default_factory=time.monotonic)


def _mark_done(proc: subprocess.Popen, done: Path, then: list[str] | None, env: dict[str, str]) -> None:
    try:
        if proc.wait() == 0 and then:
            with open(done.with_suffix(".ahead.log"), "w") as f:  # it starts the server and returns
                subprocess.run(then, cwd=ROOT, env=env, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                               timeout=600)
    except (OSError, subprocess.SubprocessError) as e:  # the timing tier's module then starts its own
        print(f"test suite: starting {' '.join(then or [])} ahead failed: {e}", flush=True)
    finally:
        done.touch()  # the tests waiting for this preparation (and finish_preparations) go on


def start_preparations(env: dict[str, str], marks: Path, ahead: bool) -> list[Preparation]:
    """Each build or install, at idle priority, with ``STEM.pending`` in ``marks`` while it runs and
    ``STEM.done`` once it has ended: the side tier's processes take the tests that need it only then.
    ``ahead``: then start the alone tier's servers (:data:`AHEAD`; marked as the run's, so the last
    tier sees one left behind)."""
    out = []
    run_env, env = env, {k: v for k, v in env.items() if k != RUN_VAR}  # not a test's process: waited for below
    for name, (script, *args) in PREPARATIONS:
        if not (ROOT / script).is_file():
            continue
        if script.endswith("vllm_server.py") and os.environ.get("LLMLOAD_SKIP_VLLM") and os.environ.get("CI") != "true":
            continue  # tests/support/vllm.py skips the vLLM tests then (never in CI)
        log = OUT / (Path(script).stem + ".log")
        prefix = idle_prefix()
        print(f"test suite: {name} beside the tests ({' '.join(prefix)}; log: {log.relative_to(ROOT)})", flush=True)
        with open(log, "w") as f:
            proc = subprocess.Popen([*prefix, sys.executable, script, *args], cwd=ROOT, env=env, stdout=f,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        (marks / f"{Path(script).stem}.pending").touch()
        then = [*prefix, sys.executable, *AHEAD[name], str(marks)] if ahead and name in AHEAD else None
        threading.Thread(target=_mark_done, args=(proc, marks / f"{Path(script).stem}.done", then, run_env),
                         daemon=True).start()
        out.append(Preparation(name, proc, log))
    return out


def finish_preparations(preparations: list[Preparation], times: list, marks: Path) -> bool:
    ok = True
    for p in preparations:
        rc = p.proc.wait()
        while rc == 0 and p.name in AHEAD and not (marks / f"{Path(PREPARATIONS_BY_NAME[p.name]).stem}.done").exists():
            time.sleep(0.5)  # its server's start-ahead is still going: stopped below once it has said where
        times.append((p.name, time.monotonic() - p.started, f"exit {rc}"))
        if p.name in AHEAD:
            sys.path.insert(0, str(ROOT))
            from tests.support.vllm import stop_prelaunched  # pytest's imports: only when it is needed

            for name in stop_prelaunched(marks):
                print(f"test suite: {name} was started ahead and no test took it: stopped")
        if rc != 0:
            tail = p.log.read_text(errors="replace").splitlines()[-20:]
            print(f"test suite: the {p.name} failed (exit {rc}); {p.log}:\n" + "\n".join(tail), flush=True)
            ok = False
    return ok


def split_junit(addopts: str) -> tuple[str, str | None]:
    """PYTEST_ADDOPTS without its --junitxml (each process writes its own), and that path."""
    out, path = [], None
    words = iter(shlex.split(addopts))
    for w in words:
        if w.startswith(("--junitxml=", "--junit-xml=")):
            path = w.split("=", 1)[1]
        elif w in ("--junitxml", "--junit-xml"):
            path = next(words, None)
        else:
            out.append(w)
    return shlex.join(out), path


def read_results(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def run_tier(tier: Tier, env: dict[str, str], pytest_args: list[str], run_dir: Path) -> tuple[int, list[Path]]:
    """The tier's pytest processes, to their end: (exit code, their JUnit files)."""
    shard_dir = run_dir / tier.name
    shard_dir.mkdir(parents=True)
    (run_dir / "tmp").mkdir(exist_ok=True)
    procs, logs, junits = [], [], []
    for k in range(tier.processes):
        name = tier.name if tier.processes == 1 else f"{tier.name}-{k}"
        junit, log = OUT / f"junit-{name}.xml", OUT / f"{name}.log"
        junit.unlink(missing_ok=True)
        cmd = [sys.executable, "-m", "pytest", "-q", "-m", tier.marks, f"--junitxml={junit}",
               f"--basetemp={run_dir / 'tmp' / name}", "-p", "no:cacheprovider"]
        penv = dict(env)
        if tier.processes > 1:
            cmd += ["-p", "tests.support.shards"]
            penv[SHARDS_VAR], penv[SHARD_INDEX_VAR] = str(shard_dir), str(k)
            penv[SHARD_COUNT_VAR] = str(tier.processes)  # tests/support/processes.free_port: ports apart
        with open(log, "w") as f:  # the child has its own copy of the descriptor
            procs.append(subprocess.Popen([*cmd, *pytest_args], cwd=ROOT, env=penv, stdout=f,
                                          stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL))
        logs.append(log)
        junits.append(junit)
    watch(procs, shard_dir / "results.jsonl", tier)
    codes = [p.wait() for p in procs]
    for log, code in zip(logs, codes, strict=True):
        text = log.read_text(errors="replace")
        if code not in (0, 5):
            print(f"\n----- {log.relative_to(ROOT)} (exit {code}) -----")
            cut = text.find("= FAILURES =")
            print(text[text.rfind("\n", 0, cut) + 1:] if cut >= 0 else text[-20000:], flush=True)
        else:
            print(f"  {log.relative_to(ROOT)}: {(text.strip().splitlines() or ['(empty)'])[-1]}")
    rc = 0 if all(c in (0, 5) for c in codes) else 1  # 5: nothing selected in that process
    if tier.processes > 1:
        rc = rc or check_all_ran(shard_dir)
    return rc, junits


def watch(procs: list[subprocess.Popen], results: Path, tier: Tier) -> None:
    """Until every process ends: each failure as it comes, and a line of progress now and then."""
    seen, last_note = 0, time.monotonic()
    while True:
        done = all(p.poll() is not None for p in procs)
        lines = read_results(results)
        for r in lines[seen:]:
            if r["outcome"] == "failed":
                print(f"  FAILED ({r['when']}, {r['seconds']:.1f} s, process {r['shard']}) {r['test']}", flush=True)
                if r.get("said"):
                    print(f"    {r['said']}", flush=True)
        seen = len(lines)
        if time.monotonic() - last_note >= PROGRESS_EVERY_S and not done:
            finished = sum(1 for r in lines if r["when"] == "call" or r["outcome"] != "passed")
            print(f"  {tier.name}: {finished} tests done, {time.strftime('%H:%M:%S')}", flush=True)
            last_note = time.monotonic()
        if done:
            return
        time.sleep(1.0)


def check_all_ran(shard_dir: Path) -> int:
    """Every collected test has a result (a process that died leaves tests without one)."""
    try:
        with open(shard_dir / "tests.json") as f:
            wanted = json.load(f)["tests"]
    except FileNotFoundError:
        return 0  # nothing was collected
    ran = {r["test"] for r in read_results(shard_dir / "results.jsonl")}
    missing = [t for t in wanted if t not in ran]
    if missing:
        print(f"test suite: {len(missing)} tests never reported (a process died?): " + ", ".join(missing[:20]))
        return 1
    return 0


def junit_cases(paths: list[Path]) -> list[tuple[float, str, str]]:
    """(seconds, test, outcome) of every test case in these JUnit files."""
    out = []
    for p in paths:
        if not p.is_file():
            continue
        for case in ET.parse(p).getroot().iter("testcase"):
            outcome = "failed" if case.find("failure") is not None or case.find("error") is not None else \
                "skipped" if case.find("skipped") is not None else "passed"
            out.append((float(case.get("time", 0)), f"{case.get('classname')}::{case.get('name')}", outcome))
    return out


def merge_junit(paths: list[Path], dest: str) -> None:
    root = ET.Element("testsuites")
    for p in paths:
        if p.is_file():
            root.extend(ET.parse(p).getroot().iter("testsuite"))
    ET.ElementTree(root).write(dest, encoding="utf-8", xml_declaration=True)


def save_durations() -> int:
    cases = junit_cases(sorted(OUT.glob("junit-*.xml")))
    if not cases:
        print(f"test suite: no JUnit files in {OUT}: run the suite first", file=sys.stderr)
        return 2
    data = {}
    for seconds, name, _ in cases:
        module, _, test = name.rpartition("::")
        nodeid = module.replace(".", "/") + ".py::" + test
        if seconds >= SAVE_OVER_S:
            data[nodeid] = round(seconds, 1)
    DURATIONS.write_text(json.dumps(dict(sorted(data.items())), indent=0) + "\n")
    print(f"test suite: {len(data)} tests of {SAVE_OVER_S:.0f} s or more in {DURATIONS.relative_to(ROOT)}")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tiers", default="side,alone,last", help="which tiers, in order (default: all three)")
    ap.add_argument("-n", "--processes", type=int, default=int(os.environ.get("LLMLOAD_TEST_PROCESSES") or 0),
                    help=f"pytest processes of the side tier (default: $LLMLOAD_TEST_PROCESSES, else {PROCESSES_QUIET} "
                         f"on a quiet machine and {PROCESSES} beside other work)")
    ap.add_argument("--no-prepare", action="store_true", help="build or install nothing beside the tests")
    ap.add_argument("--slowest", type=int, default=25, help="list the N slowest tests at the end")
    ap.add_argument("--save-durations", action="store_true", help="write tests/durations.json from the last run")
    ap.add_argument("pytest_args", nargs="*", help="passed to every pytest process (after --)")
    opts = ap.parse_args(argv)
    if opts.save_durations:
        return save_durations()
    processes = opts.processes
    if processes < 1 and any(name == "side" for name in opts.tiers.split(",")):
        processes, why = side_processes()  # before the builds start beside the tests
        print(f"test suite: {processes} processes side by side: {why}", flush=True)
    known = tiers(max(1, processes))
    chosen = [known[name] for name in opts.tiers.split(",")]

    env = dict(os.environ)
    env.setdefault(RUN_VAR, uuid.uuid4().hex)
    # Bytecode cached outside the repository. Under PYTHONDONTWRITEBYTECODE (set on this machine) every
    # process the tests start (a Locust run, a mock, a CLI report) compiled llmload and the test modules
    # from source again: 0.3 s of CPU a start, and make test-fast took 40 s against 32 s with the cache.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.setdefault("PYTHONPYCACHEPREFIX", str(Path(os.environ.get("LLMLOAD_CACHE") or Path.home() / ".cache" /
                                                   "llmload") / "pycache"))
    env["PYTEST_ADDOPTS"], junit_dest = split_junit(env.get("PYTEST_ADDOPTS", ""))
    OUT.mkdir(parents=True, exist_ok=True)
    run_dir = Path(tempfile.mkdtemp(prefix="suite-run-"))  # no "llmload" in it: tests grep their logs for that
    t0 = time.monotonic()
    marks = run_dir / "prepared"
    marks.mkdir()
    env[PREPARED_VAR] = str(marks)
    preparations = [] if opts.no_prepare else start_preparations(env, marks, ahead=any(t.name == "alone"
                                                                                        for t in chosen))
    times: list[tuple[str, float, str]] = []
    junits: list[Path] = []
    ok = True
    for tier in chosen:
        if tier.name == "last":  # the builds' processes end before "nothing is left" is checked
            ok = finish_preparations(preparations, times, marks) and ok
            preparations = []
        print(f"\ntest suite: tier '{tier.name}': {tier.what}", flush=True)
        start = time.monotonic()
        rc, files = run_tier(tier, env, opts.pytest_args, run_dir)
        cases = junit_cases(files)
        failed = sum(1 for c in cases if c[2] == "failed")
        times.append((f"tier {tier.name}", time.monotonic() - start, f"{len(cases)} tests, {failed} failed"))
        junits += files
        ok = ok and rc == 0
    ok = finish_preparations(preparations, times, marks) and ok
    if junit_dest:
        merge_junit(junits, junit_dest)
    report(times, junits, time.monotonic() - t0, opts.slowest)
    if ok:
        shutil.rmtree(run_dir, ignore_errors=True)
    else:
        print(f"test suite: the tests' files are kept in {run_dir / 'tmp'}")
    return 0 if ok else 1


def report(times: list, junits: list[Path], wall: float, n_slowest: int) -> None:
    print("\ntest suite: times")
    for name, took, note in times:
        print(f"  {name:<22} {took:7.1f} s  {note}")
    print(f"  {'whole run':<22} {wall:7.1f} s")
    cases = junit_cases(junits)
    if n_slowest:
        print(f"\ntest suite: the {n_slowest} slowest tests")
        for took, name, outcome in sorted(cases, reverse=True)[:n_slowest]:
            print(f"  {took:7.1f} s  {name}{'' if outcome == 'passed' else '  ' + outcome.upper()}")
    counts = {k: sum(1 for c in cases if c[2] == k) for k in ("passed", "failed", "skipped")}
    print(f"\n{counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped", flush=True)


if __name__ == "__main__":
    sys.exit(main())
