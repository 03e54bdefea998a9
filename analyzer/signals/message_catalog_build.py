"""Build `failure_messages.json`: the failure messages of SGLang's libraries, from their source.

    python -m analyzer.signals.message_catalog_build [--venv VENV] [--cuda CUDA_HOME]

Each entry is a message as its source writes it, the literal the signal stage searches for
(its longest fixed text), a class and advice. Sources, each read from what is installed:

- the CUDA runtime: `cudaGetErrorName` / `cudaGetErrorString` of every `cudaError_t` value,
  called through ctypes on libcudart (works without a GPU); the driver API's `CUresult`
  names and their documentation, from the toolkit's cuda.h;
- NCCL: `ncclGetErrorString` of every `ncclResult_t`, through ctypes on libnccl;
- torch's C++ errors: the strings of libc10_cuda.so / libtorch_cuda.so that open its CUDA
  out-of-memory, NCCL and cuBLAS/cuDNN errors;
- glibc's dynamic linker: `strings` of ld.so;
- glibc's heap-corruption aborts (`strings` of libc.so.6) and the strerror texts of a few
  errno values that mean the machine failed (a full disk, no memory, too many open files);
- Python raise sites (ast) of triton, torch.cuda / torch.distributed, transformers and
  huggingface_hub: the messages of their resource, compile and loading errors.

Class and advice are ours, keyed by the source and the message's words (ADVICE below).
"""

from __future__ import annotations

import argparse
import ast
import ctypes
import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

OUT = Path(__file__).with_name("failure_messages.json")
DEFAULT_VENV = "/work/main/.sglang/venv"
DEFAULT_CUDA = "/usr/local/cuda"
# a literal shorter than this, or of fewer words, is too common a phrase to mean a failure
MIN_KEY = 18
MIN_WORDS = 3

CUDA_ENVIRONMENT = (
    "InsufficientDriver", "NoKernelImageForDevice", "UnsupportedPtxVersion", "NoDevice",
    "SystemDriverMismatch", "CompatNotSupportedOnDevice", "JitCompilerNotFound",
    "SharedObjectSymbolNotFound", "SharedObjectInitFailed", "InvalidPtx", "InvalidKernelImage",
    "DeviceUninitialized", "CallRequiresNewerDriver", "UnsupportedExecAffinity",
    "SystemNotReady", "DevicesUnavailable",
)  # fmt: skip
ADVICE = {
    "cudaErrorInvalidDevice": (
        "A GPU index beyond the visible GPUs was asked for: check CUDA_VISIBLE_DEVICES against"
        " --tp-size x --dp-size (x --pp-size) and --base-gpu-id."
    ),
    "cudaErrorNoKernelImageForDevice": (
        "The installed kernels were not built for this GPU's architecture: install the"
        " torch/sgl-kernel wheels built for its compute capability (or for this CUDA)."
    ),
    "cudaErrorInsufficientDriver": (
        "The NVIDIA driver is older than the CUDA runtime the wheels were built for:"
        " upgrade the driver or install wheels built for an older CUDA."
    ),
    "cudaErrorNoDevice": (
        "No GPU is visible to the process: check CUDA_VISIBLE_DEVICES, the container's"
        " `--gpus` and `nvidia-smi`."
    ),
    "cudaErrorMemoryAllocation": (
        "The GPU ran out of memory: lower --mem-fraction-static, --max-running-requests or"
        " --cuda-graph-max-bs, or free the GPU from other processes."
    ),
    "cudaErrorIllegalAddress": (
        "A kernel accessed memory out of bounds: rerun with CUDA_LAUNCH_BLOCKING=1 to find the"
        " kernel, then try another --attention-backend or --disable-cuda-graph."
    ),
    "cudaErrorAssert": (
        "A kernel's device-side assertion failed (often an index out of range): rerun with"
        " CUDA_LAUNCH_BLOCKING=1; check the model's vocab/config against its weights."
    ),
}
CUDA_DEFAULT = "A CUDA runtime error: rerun with CUDA_LAUNCH_BLOCKING=1 to see the failing call."
CUDA_ENV_DEFAULT = "The CUDA driver, runtime or installed wheels do not fit this machine's GPU."
NCCL_ADVICE = (
    "Rerun with NCCL_DEBUG=INFO: it names the failing transport; check NCCL_SOCKET_IFNAME,"
    " NCCL_IB_DISABLE / NCCL_P2P_DISABLE and the network between the ranks."
)
LINKER_ADVICE = (
    "A shared library is missing or from another build: reinstall the package that owns it"
    " for this torch/CUDA (sgl-kernel, flashinfer, vllm...), or fix LD_LIBRARY_PATH."
)
TORCH_OOM_ADVICE = ADVICE["cudaErrorMemoryAllocation"]
TRITON_ADVICE = (
    "A Triton kernel needs more shared memory or registers than this GPU has: try another"
    " --attention-backend, or smaller --chunked-prefill-size / --cuda-graph-max-bs."
)
COMPILE_ADVICE = (
    "A kernel failed to compile: try --disable-cuda-graph / without --enable-torch-compile, or"
    " another --attention-backend; check the Triton and CUDA versions."
)
MODEL_ADVICE = (
    "The model could not be loaded: check --model-path (a local folder with config.json or a"
    " Hub id), HF_TOKEN for gated models, --trust-remote-code and the transformers version."
)
TORCH_ENV_ADVICE = (
    "torch cannot use the GPU: check the NVIDIA driver, CUDA_VISIBLE_DEVICES and that a CUDA"
    " build of torch is installed."
)
DISTRIBUTED_ADVICE = (
    "The ranks could not form their process group: check --dist-init-addr, --nnodes,"
    " --node-rank, the port being free and reachable, and NCCL_DEBUG=INFO output."
)

CLIENT_ADVICE = (
    "A client's request failed against the server: read the server's own log at that time"
    " (a 4xx is the request's fault, a 5xx/503 the server's or its router's)."
)
DEVICE_ADVICE = (
    "An operation got tensors on different devices (a GPU and the CPU, or two GPUs): a model"
    " or kernel path that left a tensor behind; check --device, --cpu-offload-gb and the"
    " model's custom code, and report it with the traceback."
)
# torch's C++ strings: (regex over `strings` lines, class, advice)
TORCH_STRINGS = {
    "libtorch_cpu.so": [
        (r"^Expected all tensors to be on the same device, but ", "runtime_crash", DEVICE_ADVICE),
    ],
    "libc10_cuda.so": [
        (r"^CUDA out of memory\. .{10,}", "oom", TORCH_OOM_ADVICE),
    ],
    "libtorch_cuda.so": [
        (r"^NCCL error in: $", "nccl_distributed", NCCL_ADVICE),
        (r"Watchdog caught collective operation timeout: $", "nccl_distributed", NCCL_ADVICE),
        (r"^NCCL communicator encountered error", "nccl_distributed", NCCL_ADVICE),
        (r"^NCCL communicator was aborted on rank $", "nccl_distributed", NCCL_ADVICE),
        (r"^CUBLAS_STATUS_(?!SUCCESS)\w+$", "cuda_error", CUDA_DEFAULT),
        (r"^CUDNN_STATUS_(?!SUCCESS)\w+$", "cuda_error", CUDA_DEFAULT),
    ],
}
# ld.so's strings that are failures (not its usage or debug output)
LINKER_STRINGS = (
    r"^cannot open shared object file$", r"^undefined symbol: ", r"^symbol lookup error$",
    r"^version lookup error$", r"^wrong ELF class: ", r"^invalid ELF header$",
    r"^cannot allocate memory in static TLS block$", r"^error while loading shared libraries",
    r"^cannot enable executable stack as shared object requires$",
    r"^(?:weak )?version `%s' not found \(required by %s\)$",
)  # fmt: skip
# glibc's heap checks (malloc/malloc.c malloc_printerr): the process aborts right after
HEAP_STRINGS = r"^(?:(?:malloc|free|realloc|calloc|munmap_chunk|malloc_consolidate)\(\): |double free or corruption|corrupted (?:size|double-linked))"
HEAP_ADVICE = (
    "The process's heap was corrupted and glibc aborted it: a native extension's bug (a kernel"
    " package built for another torch/CUDA, or a memory error in one); reinstall sgl-kernel /"
    " flashinfer for this torch, rerun to see if it recurs, and report it with the command."
)
# errno values whose strerror text, shown alone, is a failure of the machine, not the command;
# the texts are the C library's own (os.strerror), the choice and advice ours
ERRNO_ADVICE = {
    "ENOSPC": ("environment", "The disk is full: free space where the model, the cache"
               " (HF_HOME, ~/.cache) and /tmp or /dev/shm live, or point them elsewhere."),
    "EDQUOT": ("environment", "The disk quota is used up: free space or move HF_HOME and the"
               " caches to a volume with room."),
    "ENOMEM": ("environment", "The host (not the GPU) ran out of memory: stop other processes"
               " or load less into host memory (CPU offload, workers); check `free -g`, dmesg."),
    "EMFILE": ("environment", "Too many open files: raise `ulimit -n` for the server's shell."),
    "ENFILE": ("environment", "The system's open-file table is full: raise fs.file-max or stop"
               " other processes."),
    "EROFS": ("environment", "A write went to a read-only file system: point the caches and"
              " outputs at a writable folder."),
    "EIO": ("environment", "The storage returned an I/O error: check the disk or network mount"
            " the model is read from (dmesg)."),
}
# Python sources: (package-relative file[:only this function], class, advice, exception names
# kept or None: any)
PYTHON_SOURCES = [
    ("triton/runtime/errors.py", "cuda_error", TRITON_ADVICE, None),
    ("triton/compiler/errors.py", "runtime_crash", COMPILE_ADVICE, None),
    ("torch/cuda/__init__.py", "environment", TORCH_ENV_ADVICE, None),
    ("torch/_inductor/exc.py", "runtime_crash", COMPILE_ADVICE, None),
    ("torch/distributed/rendezvous.py", "nccl_distributed", DISTRIBUTED_ADVICE, None),
    ("torch/distributed/distributed_c10d.py", "nccl_distributed", DISTRIBUTED_ADVICE,
     ("RuntimeError", "DistStoreError", "DistNetworkError")),
    ("transformers/configuration_utils.py", "model_load", MODEL_ADVICE, ("OSError", "EnvironmentError")),
    ("transformers/utils/hub.py", "model_load", MODEL_ADVICE, None),
    ("transformers/models/auto/configuration_auto.py", "model_load", MODEL_ADVICE, None),
    ("transformers/models/auto/auto_factory.py", "model_load", MODEL_ADVICE, None),
    ("transformers/modeling_utils.py", "model_load", MODEL_ADVICE, ("OSError", "EnvironmentError")),
    ("transformers/dynamic_module_utils.py", "model_load", MODEL_ADVICE, None),
    ("huggingface_hub/errors.py", "model_load", MODEL_ADVICE, None),
    ("huggingface_hub/utils/_http.py", "model_load", MODEL_ADVICE, None),
    ("huggingface_hub/utils/_validators.py", "model_load", MODEL_ADVICE, None),
    ("huggingface_hub/file_download.py", "model_load", MODEL_ADVICE, None),
    # a client's HTTP error (the server answered; the client gave up): not a server failure
    ("httpx/_models.py:raise_for_status", "client_error", CLIENT_ADVICE, None),
]  # fmt: skip
FIELD = "{}"


def fixed_key(template: str) -> str | None:
    """The longest fixed text of a message template's first line that has one distinctive
    enough to search for (a paste or a client's body often keeps only its opening)."""
    for line in template.strip().split("\n"):
        parts = [p.strip(" :.,'\"`()[]") for p in line.split(FIELD)]
        found = [p for p in parts if len(p) >= MIN_KEY and len(p.split()) >= MIN_WORDS]
        if found:
            return max(found, key=len)
    return None


def _entry(
    message: str, key: str | None, rule_class: str, advice: str, source: str, kind: str
) -> dict[str, str] | None:
    key = key or fixed_key(message)
    if key is None:
        return None
    return {"key": key, "message": message, "class": rule_class, "advice": advice,
            "source": source, "kind": kind}  # fmt: skip


def cuda_entries(cuda_home: Path) -> Iterator[dict[str, str]]:
    lib = ctypes.CDLL(str(cuda_home / "lib64" / "libcudart.so"))
    lib.cudaGetErrorString.restype = ctypes.c_char_p
    lib.cudaGetErrorName.restype = ctypes.c_char_p
    for code in range(1, 1000):
        name = (lib.cudaGetErrorName(code) or b"").decode()
        text = (lib.cudaGetErrorString(code) or b"").decode()
        if not name.startswith("cudaError") or "unrecognized" in text.lower():
            continue
        short = name.removeprefix("cudaError")
        environment = short in CUDA_ENVIRONMENT
        rule_class = (
            "oom"
            if short == "MemoryAllocation"
            else ("environment" if environment else "cuda_error")
        )
        advice = ADVICE.get(name, CUDA_ENV_DEFAULT if environment else CUDA_DEFAULT)
        source = f"libcudart cudaGetErrorString({code}) ({cuda_home.resolve().name})"
        # the enum name always; the text alone when distinctive, else as torch prints it
        yield _entry(name, name, rule_class, advice, source, "cuda")  # type: ignore[misc]
        key = fixed_key(text) or f"CUDA error: {text}"
        yield _entry(text, key, rule_class, advice, source, "cuda")  # type: ignore[misc]


# the driver API's names for the runtime's environment errors (CUresult, cuda.h)
DRIVER_ENVIRONMENT = (
    "NO_DEVICE", "INVALID_DEVICE", "NO_BINARY_FOR_GPU", "UNSUPPORTED_PTX_VERSION",
    "SYSTEM_DRIVER_MISMATCH", "COMPAT_NOT_SUPPORTED_ON_DEVICE", "JIT_COMPILER_NOT_FOUND",
    "SHARED_OBJECT_SYMBOL_NOT_FOUND", "SHARED_OBJECT_INIT_FAILED", "INVALID_PTX",
    "INVALID_IMAGE", "NOT_INITIALIZED", "SYSTEM_NOT_READY", "DEVICE_UNAVAILABLE",
)  # fmt: skip
DRIVER_ADVICE = {
    "OUT_OF_MEMORY": ADVICE["cudaErrorMemoryAllocation"],
    "INVALID_DEVICE": ADVICE["cudaErrorInvalidDevice"],
    "NO_BINARY_FOR_GPU": ADVICE["cudaErrorNoKernelImageForDevice"],
    "NO_DEVICE": ADVICE["cudaErrorNoDevice"],
}


def driver_entries(cuda_home: Path) -> Iterator[dict[str, str]]:
    """The driver API's CUresult names (`CUDA_ERROR_OUT_OF_MEMORY`, as cuda-python and the
    kernels built on it print them), read from the toolkit's cuda.h with their documentation."""
    header = cuda_home / "include" / "cuda.h"
    if not header.exists():
        return
    text = header.read_text("utf-8", errors="replace")
    start = text.find("typedef enum cudaError_enum {")
    body = text[start : text.find("} CUresult;", start)]
    for doc, name in re.findall(r"/\*\*(.*?)\*/\s*(CUDA_ERROR_\w+)\s*=", body, re.S):
        short = name.removeprefix("CUDA_ERROR_")
        environment = short in DRIVER_ENVIRONMENT
        rule_class = (
            "oom" if short == "OUT_OF_MEMORY" else "environment" if environment else "cuda_error"
        )
        advice = DRIVER_ADVICE.get(short, CUDA_ENV_DEFAULT if environment else CUDA_DEFAULT)
        message = " ".join(doc.replace("*", " ").split())
        source = f"cuda.h CUresult {name} ({cuda_home.resolve().name})"
        yield {"key": name, "message": f"{name}: {message}", "class": rule_class,
               "advice": advice, "source": source, "kind": "cuda"}  # fmt: skip


def nccl_entries(venv: Path) -> Iterator[dict[str, str]]:
    found = sorted(venv.glob("lib/python3*/site-packages/nvidia/nccl/lib/libnccl.so*"))
    if not found:
        return
    lib = ctypes.CDLL(str(found[0]))
    lib.ncclGetErrorString.restype = ctypes.c_char_p
    for code in range(1, 9):
        text = lib.ncclGetErrorString(code).decode()
        source = f"libnccl ncclGetErrorString({code})"
        key = fixed_key(text.split(" (run with")[0]) or f"NCCL error: {text}"
        if entry := _entry(text, key, "nccl_distributed", NCCL_ADVICE, source, "nccl"):
            yield entry


def _strings(path: Path) -> list[str]:
    out = subprocess.run(["strings", "-n", "6", str(path)], capture_output=True, text=True)
    return out.stdout.splitlines()


def torch_entries(venv: Path) -> Iterator[dict[str, str]]:
    libs = next(iter(sorted(venv.glob("lib/python3*/site-packages/torch/lib"))), None)
    if libs is None:
        return
    for name, wanted in TORCH_STRINGS.items():
        seen: set[str] = set()
        for text in _strings(libs / name):
            for pattern, rule_class, advice in wanted:
                if re.search(pattern, text) and text not in seen:
                    seen.add(text)
                    key = text.strip(" :") if len(text.strip(" :")) >= 12 else None
                    if entry := _entry(text, key, rule_class, advice, f"torch/lib/{name}", "torch"):
                        yield entry


def linker_entries() -> Iterator[dict[str, str]]:
    ld = next(
        p
        for p in (Path("/lib64/ld-linux-x86-64.so.2"), Path("/lib/ld-linux-aarch64.so.1"))
        if p.exists()
    )
    for text in _strings(ld):
        if any(re.search(p, text) for p in LINKER_STRINGS):
            key = max(text.replace("%s", FIELD).split(FIELD), key=len).strip(" :`'()")
            yield {"key": key, "message": text, "class": "environment", "advice": LINKER_ADVICE,
                   "source": f"glibc {ld.name} (strings)", "kind": "linker"}  # fmt: skip
    # the loader's own line for a program it cannot start (elf/dl-error-skeleton.c's caller)
    yield {"key": "error while loading shared libraries", "message":
           "{}: error while loading shared libraries: {}: {}", "class": "environment",
           "advice": LINKER_ADVICE, "source": "glibc elf/rtld.c _dl_signal_error (documented: ld.so(8))",
           "kind": "linker"}  # fmt: skip


def libc_entries() -> Iterator[dict[str, str]]:
    """glibc's heap-corruption messages (strings of libc.so.6) and the strerror texts of
    ERRNO_ADVICE's errno values (os.strerror: the C library's own)."""
    import errno
    import os

    libc = next(
        (p for p in (Path("/lib/x86_64-linux-gnu/libc.so.6"), Path("/lib64/libc.so.6"),
                     Path("/lib/aarch64-linux-gnu/libc.so.6")) if p.exists()),
        None,
    )  # fmt: skip
    if libc is not None:
        for text in sorted(set(_strings(libc))):
            if re.search(HEAP_STRINGS, text) and "%" not in text:
                yield {"key": text, "message": text, "class": "runtime_crash",
                       "advice": HEAP_ADVICE, "source": f"glibc {libc.name} malloc_printerr (strings)",
                       "kind": "libc"}  # fmt: skip
    for name, (rule_class, advice) in ERRNO_ADVICE.items():
        text = os.strerror(getattr(errno, name))
        yield {"key": text, "message": text, "class": rule_class, "advice": advice,
               "source": f"C library strerror({name})", "kind": "libc"}  # fmt: skip


def _template(node: ast.expr) -> str | None:
    """A raise's message as a template (`{}` for run-time values), if it is text."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else FIELD for v in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _template(node.left), _template(node.right)
        return None if left is None and right is None else f"{left or FIELD}{right or FIELD}"
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        if node.func.attr == "format" and (base := _template(node.func.value)):
            return re.sub(r"\{[^{}]*\}", FIELD, base)
    return None


def _raised(tree: ast.AST) -> Iterator[tuple[str, str, str]]:
    """(exception name, message template, function) of every raise and error __str__."""
    for func in [
        n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
    ]:
        for node in ast.walk(func):
            if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and node.exc.args:
                name = node.exc.func
                exc = name.attr if isinstance(name, ast.Attribute) else getattr(name, "id", "")
                if (text := _template(node.exc.args[0])) is not None:
                    yield exc, text, func.name
            elif isinstance(node, ast.Assign) and _names(node, "message"):
                if (text := _template(node.value)) is not None:  # httpx raise_for_status
                    yield "", re.sub(r"\{[^{}]*\}", FIELD, text), func.name
            elif func.name == "__str__" and isinstance(node, ast.Return) and node.value:
                if (text := _template(node.value)) is not None:
                    yield "", text, func.name


def _names(node: ast.Assign, name: str) -> bool:
    return any(isinstance(t, ast.Name) and t.id == name for t in node.targets)


def python_entries(venv: Path) -> Iterator[dict[str, str]]:
    site = next(iter(sorted(venv.glob("lib/python3*/site-packages"))))
    for where, rule_class, advice, kept in PYTHON_SOURCES:
        relative, _, only = where.partition(":")
        path = site / relative
        if not path.exists():
            continue
        tree = ast.parse(path.read_text("utf-8"))
        for exc, text, function in _raised(tree):
            if only and function != only:
                continue
            if (kept and exc not in kept) or function == "register":
                continue  # register(): a name clash SGLang's model registry catches and skips
            source = f"{relative} {function}"
            if entry := _entry(text, None, rule_class, advice, source, relative.split("/")[0]):
                yield entry
            # its opening too when it names the failure before a colon (`out of resource: `):
            # a paste cut before the longest fixed text still shows it
            opening = text.split(FIELD)[0].strip()
            if opening.endswith(":") and len(opening.split()) >= MIN_WORDS and FIELD in text:
                if entry := _entry(
                    text, opening, rule_class, advice, source, relative.split("/")[0]
                ):
                    yield entry


def build(venv: Path, cuda_home: Path) -> dict:
    entries = [
        *cuda_entries(cuda_home), *driver_entries(cuda_home), *nccl_entries(venv),
        *torch_entries(venv),
        *linker_entries(), *libc_entries(), *python_entries(venv),
    ]  # fmt: skip
    seen: set[str] = set()
    unique = []
    for entry in entries:
        if entry["key"] not in seen:
            seen.add(entry["key"])
            unique.append(entry)
    return {
        "how": "built by `python -m analyzer.signals.message_catalog_build` from the installed"
        " CUDA runtime, NCCL, torch, triton, transformers, huggingface_hub and glibc's ld.so"
        " and libc",
        "entries": unique,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--venv", default=DEFAULT_VENV)
    parser.add_argument("--cuda", default=DEFAULT_CUDA)
    parser.add_argument("--out", default=str(OUT))
    args = parser.parse_args()
    data = build(Path(args.venv), Path(args.cuda))
    Path(args.out).write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", "utf-8")
    print(f"{len(data['entries'])} entries -> {args.out}")


if __name__ == "__main__":
    main()
