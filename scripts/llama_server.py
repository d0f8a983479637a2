"""A real inference engine for tests: llama.cpp's ``llama-server`` built from source, serving a tiny
random-weight Llama model written here.

The source is the llama.cpp tree vendored in ``llama-cpp-python``'s sdist on PyPI (the only
registry this project may download code from); the build is cached outside the repository, under
``$LLMLOAD_CACHE`` or ``~/.cache/llmload``, keyed by the sdist version, the cmake options, the
compiler and the CPU (the build is ``-march=native``), so a machine builds it once (~7 min on 2
cores) and reuses it.

Usage::

    from scripts.llama_server import ensure_llama_server, start_llama_server, write_tiny_model

    binary = ensure_llama_server()              # builds once, then returns the cached path
    write_tiny_model("/tmp/tiny.gguf")          # 2 layers, 64 wide, 382-token vocab, chatml template
    proc, url = start_llama_server("/tmp/tiny.gguf", 0, server_args())  # port 0: the server picks
    ...                                         # url == "http://127.0.0.1:PORT", /health answered 200
    stop_llama_server(proc)

From a shell::

    python scripts/llama_server.py build                 # prints the binary's path
    python scripts/llama_server.py model /tmp/tiny.gguf
    python scripts/llama_server.py serve                 # prints its URL; 4 slots, --metrics
    python scripts/llama_server.py serve --port 8081 -- -np 1 -c 2048
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path

SDIST_NAME = "llama-cpp-python"
SDIST_VERSION = "0.3.36"
# Pinned so that a changed upload on the registry cannot change what we build.
SDIST_SHA256 = "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e"
# The llama.cpp commit that sdist vendors (its CHANGELOG: "update llama.cpp to ggml-org/llama.cpp@0c1e57098").
LLAMA_CPP_COMMIT = "0c1e57098"

# Only the server, statically linked; nothing fetched at build time: the web UI is neither built
# (npm) nor downloaded prebuilt, and there is no TLS (this version has no libcurl option any more:
# LLAMA_CURL only warns that it is deprecated, and HTTPS comes from LLAMA_OPENSSL).
CMAKE_OPTIONS: tuple[str, ...] = (
    "-DCMAKE_BUILD_TYPE=Release",
    "-DBUILD_SHARED_LIBS=OFF",
    "-DGGML_NATIVE=ON",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_BUILD_TOOLS=ON",
    "-DLLAMA_BUILD_SERVER=ON",
    "-DLLAMA_BUILD_APP=OFF",
    "-DLLAMA_BUILD_UI=OFF",
    "-DLLAMA_USE_PREBUILT_UI=OFF",
    "-DLLAMA_OPENSSL=OFF",
    f"-DLLAMA_BUILD_COMMIT={LLAMA_CPP_COMMIT}",
)
TARGET = "llama-server"

Log = Callable[[str], None]


class LlamaServerError(RuntimeError):
    """The build or the server failed; the message says what and ends with the log's tail."""


def _stderr(msg: str) -> None:
    print(f"[llama-server] {msg}", file=sys.stderr, flush=True)


def cache_root() -> Path:
    return Path(os.environ.get("LLMLOAD_CACHE") or Path.home() / ".cache" / "llmload")


def _compiler_id() -> str:
    cxx = os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++") or "c++"
    try:
        return subprocess.run([cxx, "--version"], capture_output=True, text=True, timeout=30).stdout.splitlines()[0]
    except (OSError, IndexError, subprocess.SubprocessError):
        return cxx


def _cpu_flags() -> str:
    # -march=native: a binary built on one CPU may use instructions another lacks.
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith(("flags", "Features")):
                    return " ".join(sorted(line.split(":", 1)[1].split()))
    except OSError:
        pass
    return platform.processor() or platform.machine()


def build_key() -> str:
    """What the cached binary depends on: sdist, options, compiler, CPU."""
    ident = json.dumps([SDIST_VERSION, SDIST_SHA256, TARGET, CMAKE_OPTIONS, _compiler_id(), _cpu_flags()])
    return f"{SDIST_VERSION}-{hashlib.sha256(ident.encode()).hexdigest()[:12]}"


def build_dir() -> Path:
    return cache_root() / "llama-server" / build_key()


def _check_tools() -> list[str]:
    """The build tools, or one error naming each missing one and how to install it."""
    missing = []
    if not shutil.which("cmake"):
        missing.append("cmake")
    if not (os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++")):
        missing.append("a C++ compiler (g++)")
    if not (os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")):
        missing.append("a C compiler (gcc)")
    generator = ["-G", "Ninja"] if shutil.which("ninja") else []
    if not generator and not shutil.which("make"):
        missing.append("make or ninja")
    if missing:
        raise LlamaServerError(
            f"cannot build {TARGET}: missing {', '.join(missing)}; "
            "install them with: apt-get install -y cmake g++ make (or ninja-build)"
        )
    return generator


def _tail(path: Path, lines: int = 40) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return "(no log)"
    return "\n".join(text[-lines:])


def _run(cmd: Sequence[str], log_path: Path, what: str, cwd: Path | None = None) -> None:
    with open(log_path, "a") as log:
        log.write(f"\n$ {' '.join(cmd)}\n")
        log.flush()
        rc = subprocess.run(list(cmd), cwd=cwd, stdout=log, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL).returncode
    if rc != 0:
        raise LlamaServerError(f"{what} failed (exit {rc}); log {log_path}, last lines:\n{_tail(log_path)}")


def _download_sdist(dest: Path, log_path: Path) -> Path:
    # The sdist only (not ":all:", which would also build pip's metadata step's own build
    # dependencies from source: 5 minutes instead of 10 s).
    _run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", SDIST_NAME, "--disable-pip-version-check",
         "-d", str(dest), f"{SDIST_NAME}=={SDIST_VERSION}"],
        log_path, f"pip download {SDIST_NAME}=={SDIST_VERSION}",
    )
    found = sorted(dest.glob(f"llama_cpp_python-{SDIST_VERSION}.tar.gz"))
    if not found:
        raise LlamaServerError(f"pip download left no llama_cpp_python-{SDIST_VERSION}.tar.gz in {dest}")
    digest = hashlib.sha256(found[0].read_bytes()).hexdigest()
    if digest != SDIST_SHA256:
        raise LlamaServerError(f"{found[0]}: sha256 {digest}, expected {SDIST_SHA256}")
    return found[0]


def _unpack_llama_cpp(sdist: Path, dest: Path) -> Path:
    prefix = f"llama_cpp_python-{SDIST_VERSION}/vendor/llama.cpp/"
    with tarfile.open(sdist) as tar:
        members = [m for m in tar.getmembers() if m.name.startswith(prefix)]
        if not any(m.name.startswith(prefix + "tools/server/") for m in members):
            raise LlamaServerError(f"{sdist}: no {prefix}tools/server in this sdist")
        tar.extractall(dest, members=members, filter="data")
    return dest / prefix


def ensure_llama_server(jobs: int | None = None, log: Log = _stderr) -> Path:
    """The path of a built ``llama-server``: the cached one, or one built now (once; concurrent
    callers wait on a lock). Raises LlamaServerError with the build log's tail on failure."""
    out = build_dir()
    binary = out / "bin" / TARGET
    if binary.is_file() and (out / "build.json").is_file():
        return binary
    out.mkdir(parents=True, exist_ok=True)
    with open(out / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if binary.is_file() and (out / "build.json").is_file():
            return binary
        generator = _check_tools()
        for stale in out.glob("llama-build-*"):  # left by a build that was killed
            shutil.rmtree(stale, ignore_errors=True)
        log_path = out / "build.log"
        log_path.write_text("")
        jobs = jobs or int(os.environ.get("LLMLOAD_BUILD_JOBS") or os.cpu_count() or 2)
        log(f"building {TARGET} from {SDIST_NAME} {SDIST_VERSION} (llama.cpp {LLAMA_CPP_COMMIT}) "
            f"with -j{jobs} into {out}; log: {log_path}")
        t0 = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="llama-build-", dir=out) as work:
            work_dir = Path(work)
            sdist = _download_sdist(work_dir / "sdist", log_path)
            t_download = time.monotonic() - t0
            src = _unpack_llama_cpp(sdist, work_dir / "src")
            build = work_dir / "build"
            _run(["cmake", "-S", str(src), "-B", str(build), *generator, *CMAKE_OPTIONS], log_path, "cmake configure")
            t1 = time.monotonic()
            _run(["cmake", "--build", str(build), "--target", TARGET, "-j", str(jobs)], log_path, f"build of {TARGET}")
            t_compile = time.monotonic() - t1
            built = build / "bin" / TARGET
            if not built.is_file():
                raise LlamaServerError(f"the build finished but left no {built}; log {log_path}")
            (out / "bin").mkdir(exist_ok=True)
            shutil.copy2(built, binary.with_suffix(".tmp"))
            os.replace(binary.with_suffix(".tmp"), binary)
        elapsed = time.monotonic() - t0
        info = {
            "sdist": f"{SDIST_NAME}=={SDIST_VERSION}", "llama_cpp_commit": LLAMA_CPP_COMMIT,
            "cmake_options": list(CMAKE_OPTIONS), "compiler": _compiler_id(), "jobs": jobs,
            "download_s": round(t_download, 1), "compile_s": round(t_compile, 1), "total_s": round(elapsed, 1),
            "binary_bytes": binary.stat().st_size, "built_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        }
        (out / "build.json").write_text(json.dumps(info, indent=2) + "\n")
        log(f"built {binary} in {elapsed:.0f} s (download {t_download:.0f} s, compile {t_compile:.0f} s), "
            f"{info['binary_bytes'] / 1e6:.1f} MB")
        return binary


# --- the tiny model ---------------------------------------------------------------------------

WEIGHT_TYPES = {"F32": "ALL_F32", "F16": "MOSTLY_F16", "Q8_0": "MOSTLY_Q8_0"}  # → gguf.LlamaFileType
CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

# SentencePiece-style vocabulary: specials, chatml markers, the 256 byte-fallback tokens (so any
# text tokenizes), then "▁" and printable ASCII, so plain English is about one token per character.
_SPECIALS = ["<unk>", "<s>", "</s>", "<|im_start|>", "<|im_end|>"]


def tiny_vocab() -> tuple[list[str], list[float], list[int]]:
    """Tokens, scores and token types (gguf.TokenType values) of the tiny model's vocabulary."""
    tokens = list(_SPECIALS)
    types = [2, 3, 3, 3, 3]  # UNKNOWN, then CONTROL
    tokens += [f"<0x{b:02X}>" for b in range(256)]
    types += [6] * 256  # BYTE
    pieces = ["\u2581"] + [chr(c) for c in range(33, 127)]
    pieces += ["\u2581" + chr(c) for c in range(ord("a"), ord("z") + 1)]
    tokens += pieces
    types += [1] * len(pieces)  # NORMAL
    scores = [0.0] * (len(_SPECIALS) + 256) + [-float(i) for i in range(len(pieces))]
    return tokens, scores, types


def write_tiny_model(
    path: str | os.PathLike,
    *,
    seed: int = 0,
    n_embd: int = 64,
    n_layer: int = 2,
    n_head: int = 4,
    n_head_kv: int = 2,
    n_ff: int = 128,
    context_length: int = 32768,
    plain_output: bool = True,
    eos_first: bool = False,
    weights: str = "F32",
) -> Path:
    """Write a random-weight Llama GGUF (f32, ~0.5 MB) with a SentencePiece vocabulary and a
    chatml template. Same seed, same bytes.

    ``weights``: the type of the weight matrices, ``F32``, ``F16`` or ``Q8_0`` (quantised here with
    the ``gguf`` package's own Q8_0 code: blocks of 32 weights, one f16 scale each, as llama-quantize
    writes them); the norms stay f32, as llama.cpp's converters keep them. Serve a Q8_0 file with
    ``--no-repack``: this llama.cpp's CPU backend repacks Q8_0 weights into interleaved rows at load
    and crashes (SIGSEGV) on matrices this small; unrepacked, it serves them.

    With ``plain_output`` the model practically never samples a special or a byte token: its
    replies never end by themselves (a request without ``ignore_eos`` still runs to
    ``max_tokens``), and every token is printable ASCII, so llama.cpp streams exactly one chunk
    per token (it holds back and merges the pieces of an incomplete UTF-8 character, and skips
    the role chunk when the first token is one). How: residual dimension 0 is a constant (every
    embedding has +8 there and no layer writes to it), and the output matrix gives those tokens
    -2 and every other token +2 along it, about 30 logits apart after the norm.

    ``eos_first`` (with ``plain_output``) gives the end-of-sequence token +4 there instead: every
    reply ends at once unless the request sets ``ignore_eos``, which a test can then check."""
    import gguf  # only the model writer needs it
    import numpy as np

    if weights not in WEIGHT_TYPES:
        raise ValueError(f"weights={weights!r}: expected one of {', '.join(WEIGHT_TYPES)}")

    rng = np.random.default_rng(seed)
    tokens, scores, types = tiny_vocab()
    n_vocab = len(tokens)
    head_dim = n_embd // n_head
    n_embd_kv = head_dim * n_head_kv

    def w(*shape: int, scale: float = 0.08) -> np.ndarray:
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    writer = gguf.GGUFWriter(str(out), "llama")
    writer.add_name("llmload-tiny-llama")
    writer.add_context_length(context_length)
    writer.add_embedding_length(n_embd)
    writer.add_block_count(n_layer)
    writer.add_feed_forward_length(n_ff)
    writer.add_head_count(n_head)
    writer.add_head_count_kv(n_head_kv)
    writer.add_rope_dimension_count(head_dim)
    writer.add_rope_freq_base(10000.0)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_vocab_size(n_vocab)
    writer.add_file_type(getattr(gguf.LlamaFileType, WEIGHT_TYPES[weights]))

    writer.add_tokenizer_model("llama")
    writer.add_tokenizer_pre("default")
    writer.add_token_list(tokens)
    writer.add_token_scores(scores)
    writer.add_token_types(types)
    writer.add_unk_token_id(0)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_add_bos_token(True)
    writer.add_add_eos_token(False)
    writer.add_chat_template(CHATML_TEMPLATE)

    # numpy shape (rows, cols) is GGUF ne = {cols, rows}: llama.cpp wants token_embd {n_embd, n_vocab}.
    embd = w(n_vocab, n_embd, scale=0.5)
    output = w(n_vocab, n_embd)
    if plain_output:
        embd[:, 0] = 8.0
        output[:, 0] = [2.0 if t == 1 else -2.0 for t in types]  # NORMAL pieces only
        if eos_first:
            output[tokens.index("</s>"), 0] = 4.0
    def matrix(name: str, data: np.ndarray) -> None:
        if weights == "F16":
            writer.add_tensor(name, data.astype(np.float16))
        elif weights == "Q8_0":
            q8 = gguf.GGMLQuantizationType.Q8_0
            writer.add_tensor(name, gguf.quants.quantize(data, q8), raw_dtype=q8)
        else:
            writer.add_tensor(name, data)

    matrix("token_embd.weight", embd)
    writer.add_tensor("output_norm.weight", np.ones(n_embd, dtype=np.float32))
    matrix("output.weight", output)
    for i in range(n_layer):
        attn_out = w(n_embd, n_embd)
        ffn_down = w(n_embd, n_ff)
        if plain_output:  # keep residual dimension 0 constant
            attn_out[0, :] = 0.0
            ffn_down[0, :] = 0.0
        writer.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(n_embd, dtype=np.float32))
        matrix(f"blk.{i}.attn_q.weight", w(n_embd, n_embd))
        matrix(f"blk.{i}.attn_k.weight", w(n_embd_kv, n_embd))
        matrix(f"blk.{i}.attn_v.weight", w(n_embd_kv, n_embd))
        matrix(f"blk.{i}.attn_output.weight", attn_out)
        writer.add_tensor(f"blk.{i}.ffn_norm.weight", np.ones(n_embd, dtype=np.float32))
        matrix(f"blk.{i}.ffn_gate.weight", w(n_ff, n_embd))
        matrix(f"blk.{i}.ffn_up.weight", w(n_ff, n_embd))
        matrix(f"blk.{i}.ffn_down.weight", ffn_down)

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return out


# --- the server -------------------------------------------------------------------------------


_LISTENING = re.compile(r"listening on (http://127\.0\.0\.1:\d+)")


def _health(url: str) -> int | None:
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=2) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code  # 503 while the model loads
    except (urllib.error.URLError, OSError):
        return None


def server_args(n_slots: int = 4, ctx_per_slot: int = 4096, alias: str = "tiny-llama") -> list[str]:
    """The arguments tests use: ``n_slots`` parallel slots of ``ctx_per_slot`` tokens each (the
    context is split evenly between slots unless --kv-unified), Prometheus ``/metrics``,
    ``/slots``, the prompt cache (a repeated prefix is reused and reported as cached_tokens),
    one thread: ggml's threads meet at a barrier after every operation, so with two threads on two
    cores a neighbour that takes one core (another test, a build) can stall each barrier for up to a
    scheduler slice, and the suite always has neighbours. One thread costs a tiny model little
    (vLLM's tier runs one OpenMP thread for the same reason)."""
    return ["-np", str(n_slots), "-c", str(n_slots * ctx_per_slot), "--metrics", "--slots", "--cache-prompt",
            "--alias", alias, "--threads", "1"]


def start_llama_server(
    model: str | os.PathLike,
    port: int,
    extra_args: Sequence[str] = (),
    *,
    binary: str | os.PathLike | None = None,
    log_path: str | os.PathLike | None = None,
    timeout: float = 60.0,
) -> tuple[subprocess.Popen, str]:
    """Start ``llama-server`` on 127.0.0.1:port and wait (at most ``timeout`` s) until ``/health``
    answers 200. Port 0: the server binds a free port itself and logs it (no race with other
    processes). Its output goes to ``log_path`` (default: beside the model). On failure the
    process is stopped and LlamaServerError carries the log's tail."""
    exe = Path(binary) if binary else ensure_llama_server()
    log_file = Path(log_path) if log_path else Path(model).with_suffix(f".server-{port or time.monotonic_ns()}.log")
    cmd = [str(exe), "-m", str(model), "--host", "127.0.0.1", "--port", str(port), "--no-webui", *extra_args]
    url = f"http://127.0.0.1:{port}" if port else None
    with open(log_file, "w") as log:
        log.write(f"$ {' '.join(cmd)}\n")
        log.flush()
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            raise LlamaServerError(f"{exe} exited with {proc.returncode} while starting; log {log_file}:\n"
                                   f"{_tail(log_file)}")
        if url is None:
            found = _LISTENING.search(log_file.read_text(errors="replace"))
            url = found.group(1) if found else None
        if url is not None and _health(url) == 200:
            return proc, url
        if time.monotonic() >= deadline:
            stop_llama_server(proc)
            raise LlamaServerError(f"{url}/health did not answer 200 within {timeout:.0f} s; log {log_file}:\n"
                                   f"{_tail(log_file)}")
        time.sleep(0.05)


def stop_llama_server(proc: subprocess.Popen, timeout: float = 10.0) -> None:
    proc.terminate()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="build llama-server once into the cache; print its path")
    b.add_argument("-j", "--jobs", type=int, default=None)
    m = sub.add_parser("model", help="write the tiny random-weight model")
    m.add_argument("path")
    m.add_argument("--seed", type=int, default=0)
    m.add_argument("--weights", choices=list(WEIGHT_TYPES), default="F32", help="type of the weight matrices")
    s = sub.add_parser("serve", help="serve the tiny model until interrupted; server args after -- "
                                     "(default: 4 slots of 4096 tokens, --metrics)")
    s.add_argument("--port", type=int, default=0, help="default: a free port the server picks")
    s.add_argument("--model", default=None, help="default: the tiny model, written to the cache")
    s.add_argument("server_args", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    try:
        if args.cmd == "build":
            print(ensure_llama_server(args.jobs))
        elif args.cmd == "model":
            print(write_tiny_model(args.path, seed=args.seed, weights=args.weights))
        else:
            model = args.model or str(write_tiny_model(cache_root() / "tiny-llama.gguf"))
            extra = [a for a in args.server_args if a != "--"] or server_args()
            proc, url = start_llama_server(model, args.port, extra)
            print(url, flush=True)
            signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # so that `finally` stops the server
            try:
                proc.wait()
            except KeyboardInterrupt:
                pass
            finally:
                stop_llama_server(proc)
    except LlamaServerError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
