"""Run a launch command's arguments through the installed SGLang's own validation.

A corrected command that SGLang then rejects costs the user another crash cycle, so before we
say "run this" we can ask SGLang itself. In a fresh subprocess of SGLang's Python we run exactly
the steps launch_server takes before it touches a tokenizer, a port or a weight: load_plugins(),
prepare_server_args(argv) (SGLang's parser: its prefix expansion and choices),
server_args.resolve_once() (where speculative-decoding and config checks live) and
server_args.check_server_args(). A subprocess, because resolution publishes process-wide state,
and because the SGLang install may be a different environment from ours.

Model paths that do not exist here are replaced by stand-in folders holding only a config.json:
that is all parsing and resolution read, and it keeps the check offline and GPU-free.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from analyzer.core.model import Verification
from analyzer.sglang.launch_command import Argument, parse_launch_command

VERIFY_MARKER = "LOGANALYZE-VERIFY-OK"
VERSION_MARKER = "LOGANALYZE-SGLANG-VERSION "
IMPORT_FAILED_MARKER = "LOGANALYZE-SGLANG-IMPORT-FAILED "
IMPORT_FAILED_EXIT = 3
PYTHON_ENV = "LOGANALYZE_SGLANG_PYTHON"

# Both snippets start alike: import SGLang (an import failure is a broken install, with its
# own marker and exit status), say its version, load its plugins.
IMPORT_SGLANG = f"""
try:
    import sglang
    from sglang.srt.server_args import prepare_server_args
except Exception as exc:
    lines = str(exc).strip().splitlines()
    print({IMPORT_FAILED_MARKER!r} + type(exc).__name__ + (": " + lines[-1] if lines else ""))
    sys.exit({IMPORT_FAILED_EXIT})
print({VERSION_MARKER!r} + getattr(sglang, "__version__", "unknown"), flush=True)
try:
    from sglang.srt.plugins import load_plugins  # 0.5.19+
except ImportError:
    load_plugins = None
if load_plugins is not None:
    load_plugins()
"""

# What runs in SGLang's Python: launch_server's steps up to (not into) run_server's dispatch,
# plus the check engine._launch_subprocesses runs next. An import failure is a broken install,
# not a rejected command, so it gets its own marker and exit status.
VERIFY_SNIPPET = "import sys\n" + IMPORT_SGLANG + f"""
server_args = prepare_server_args(sys.argv[1:])
if hasattr(server_args, "resolve_once"):  # 0.5.19+; before, __post_init__ resolved
    server_args.resolve_once()
server_args.check_server_args()
print({VERIFY_MARKER!r})
"""

# Many commands, one SGLang import: the parent imports SGLang once and forks a child per
# command (resolution's process-wide state stays in the child), `jobs` at a time. Each child
# writes stdout and stderr to one file, interleaved as a launch's log would be. The modules a
# child imported lazily are imported by the parent afterwards, so later children start warm.
# stdin: {"argvs": [[...], ...], "out": folder, "jobs": N, "timeout": seconds}; stdout: one
# JSON line {"index", "code", "seconds"} per command, in the order they finish.
BATCH_SNIPPET = "import importlib, json, os, signal, sys, time, traceback\n" + IMPORT_SGLANG + f"""
job = json.loads(sys.stdin.read())

def child(argv, path, modules_path):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    before = set(sys.modules)
    code = 0
    try:
        server_args = prepare_server_args(argv)
        if hasattr(server_args, "resolve_once"):
            server_args.resolve_once()
        server_args.check_server_args()
        print({VERIFY_MARKER!r})
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:
        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    with open(modules_path, "w") as out:
        out.write("\\n".join(sorted(set(sys.modules) - before)))
    os._exit(code)

running = {{}}
pending = list(enumerate(job["argvs"]))
while pending or running:
    while pending and len(running) < job["jobs"]:
        index, argv = pending.pop(0)
        path = os.path.join(job["out"], f"{{index}}.log")
        modules = path + ".modules"
        pid = os.fork()
        if pid == 0:
            child(argv, path, modules)
        running[pid] = (index, time.monotonic(), modules)
    pid, status = os.waitpid(-1, os.WNOHANG)
    if pid == 0:
        for pid, (index, started, _) in list(running.items()):
            if time.monotonic() - started > job["timeout"]:
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.01)
        continue
    index, started, modules = running.pop(pid)
    code = os.waitstatus_to_exitcode(status)
    print(json.dumps({{"index": index, "code": code, "seconds": time.monotonic() - started}}),
          flush=True)
    if os.path.exists(modules):
        for name in open(modules).read().split():
            try:
                importlib.import_module(name)
            except BaseException:
                pass
"""

_LLAMA_COMMON: dict[str, object] = {
    "bos_token_id": 1,
    "eos_token_id": 2,
    "head_dim": 64,
    "hidden_act": "silu",
    "hidden_size": 256,
    "initializer_range": 0.02,
    "intermediate_size": 688,
    "max_position_embeddings": 4096,
    "model_type": "llama",
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "rms_norm_eps": 1e-05,
    "rope_scaling": None,
    "rope_theta": 10000.0,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "transformers_version": "4.46.0",
    "use_cache": True,
    "vocab_size": 32000,
}
# Same shapes as fixtures/models/*/config.json: a 2-layer Llama target and one-layer drafts.
TARGET_CONFIG: dict[str, object] = {
    "architectures": ["LlamaForCausalLM"],
    "attention_bias": False,
    "attention_dropout": 0.0,
    "mlp_bias": False,
    "num_hidden_layers": 2,
    "pretraining_tp": 1,
    **_LLAMA_COMMON,
}
EAGLE3_DRAFT_CONFIG: dict[str, object] = {
    "architectures": ["LlamaForCausalLMEagle3"],
    "attention_bias": False,
    "attention_dropout": 0.0,
    "draft_vocab_size": 8000,
    "num_hidden_layers": 1,
    **_LLAMA_COMMON,
}
EAGLE_DRAFT_CONFIG: dict[str, object] = {
    "architectures": ["LlamaForCausalLMEagle"],
    "num_hidden_layers": 1,
    **_LLAMA_COMMON,
}

_MODEL_FLAG = "--model-path"
_DRAFT_FLAG = "--speculative-draft-model-path"
_ALGORITHM_FLAG = "--speculative-algorithm"
_CONTEXT_FLAG = "--context-length"
_EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt)\b")
_ARGPARSE_ERROR = re.compile(r"^\S.*: error: ")


def sglang_python() -> str | None:
    """The Python to verify with: $LOGANALYZE_SGLANG_PYTHON, else ours if it has sglang."""
    configured = os.environ.get(PYTHON_ENV)
    if configured:
        return configured
    return sys.executable if importlib.util.find_spec("sglang") is not None else None


def verify_command(
    command_text: str,
    python: str | None = None,
    timeout: float = 120,
    pythonpath: str | None = None,
    catalog_version: str | None = None,
) -> Verification:
    """Run the command's SGLang arguments through SGLang's parsing, resolution and checks.

    When SGLang cannot answer (not installed, broken, too slow) the verdict carries the
    flag catalog check of `catalog_version` (default: the newest) instead. `pythonpath`
    puts another SGLang release first on SGLang's path (a `pip install --target` folder).
    """
    result = _ask_sglang(command_text, python, timeout, pythonpath)
    if result.status in ("pass", "fail"):
        return result
    return dataclasses.replace(result, catalog_check=catalog_check(command_text, catalog_version))


def _ask_sglang(
    command_text: str, python: str | None, timeout: float, pythonpath: str | None
) -> Verification:
    start = time.monotonic()
    python = python or sglang_python()
    if python is None:
        return Verification(
            "unavailable",
            None,
            f"sglang is not installed here (install loganalyze[sglang] or set {PYTHON_ENV}); "
            "only the flag catalog check applies",
            0.0,
        )
    with tempfile.TemporaryDirectory(prefix="loganalyze-verify-") as scratch:
        try:
            argv = sglang_argv(command_text, Path(scratch))
        except ValueError as exc:
            return Verification("fail", None, str(exc), time.monotonic() - start)
        return _run(python, argv, timeout, start, pythonpath)


@dataclasses.dataclass(frozen=True)
class BatchRun:
    """One command of a batch: its exit status and its whole output (stdout and stderr)."""

    code: int
    output: str
    seconds: float


def run_batch(
    argvs: list[list[str]],
    python: str | None = None,
    timeout: float = 120,
    pythonpath: str | None = None,
    jobs: int = 2,
) -> tuple[str | None, list[BatchRun | None]]:
    """SGLang's version and each argv's run through SGLang's checks (BATCH_SNIPPET).

    None for a command that did not report (SGLang missing or broken: the version is None
    then too; a child killed on timeout reports a signal status).
    """
    python = python or sglang_python()
    if python is None or not argvs:
        return None, [None] * len(argvs)
    env = _sglang_env(pythonpath)
    with tempfile.TemporaryDirectory(prefix="loganalyze-batch-") as out:
        job = {"argvs": argvs, "out": out, "jobs": max(jobs, 1), "timeout": timeout}
        try:
            done = subprocess.run(
                [python, "-c", BATCH_SNIPPET],
                input=json.dumps(job).encode(),
                capture_output=True,
                env=env,
                timeout=timeout * (len(argvs) / max(jobs, 1) + 2),
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired):
            return None, [None] * len(argvs)
        version = None
        runs: list[BatchRun | None] = [None] * len(argvs)
        for line in done.stdout.decode("utf-8", errors="replace").splitlines():
            if line.startswith(VERSION_MARKER):
                version = line[len(VERSION_MARKER) :].strip()
            elif line.startswith("{"):
                row = json.loads(line)
                log = Path(out, f"{row['index']}.log")
                text = log.read_text("utf-8", errors="replace") if log.exists() else ""
                runs[row["index"]] = BatchRun(int(row["code"]), text, float(row["seconds"]))
        return version, runs


def verify_commands(
    commands: list[str],
    python: str | None = None,
    timeout: float = 120,
    pythonpath: str | None = None,
    catalog_version: str | None = None,
) -> list[Verification]:
    """verify_command for many commands at the cost of one SGLang import."""
    with tempfile.TemporaryDirectory(prefix="loganalyze-verify-") as scratch:
        argvs: list[list[str] | None] = []
        for index, text in enumerate(commands):
            folder = Path(scratch, str(index))
            folder.mkdir()
            try:
                argvs.append(sglang_argv(text, folder))
            except ValueError:
                argvs.append(None)
        runnable = [a for a in argvs if a is not None]
        version, runs = run_batch(runnable, python, timeout, pythonpath)
    answers = iter(runs)
    verdicts = []
    for text, argv in zip(commands, argvs, strict=True):
        run = next(answers) if argv is not None else None
        if argv is None:
            verdict = Verification("fail", None, "no SGLang launch found in the command", 0.0)
        elif run is None or version is None:
            verdict = verify_command(text, python, timeout, pythonpath, catalog_version)
        else:
            verdict = judge_run(run, version)
        verdicts.append(verdict)
    return verdicts


def judge_run(run: BatchRun, version: str) -> Verification:
    """The verdict on one command of run_batch (SGLang's version known)."""
    return _judge(run.code, f"{VERSION_MARKER}{version}\n{run.output}", run.output, run.seconds)


def catalog_check(command_text: str, version: str | None = None) -> str:
    """The fallback verdict: what the shipped flag catalog finds wrong, in one line."""
    from analyzer.sglang.catalog import CatalogError, load_catalog
    from analyzer.sglang.catalog_check import validate

    try:
        catalog = load_catalog(version)
    except CatalogError as exc:
        return f"no catalog check: {exc}"
    command = parse_launch_command(command_text, catalog.takes_value)
    if command is None:
        return "no catalog check: no SGLang launch in the command"
    problems = validate(command, catalog)
    if not problems:
        return f"passes the sglang {catalog.version} flag catalog"
    return f"sglang {catalog.version} flag catalog: " + "; ".join(problems)


def sglang_argv(command_text: str, scratch: Path) -> list[str]:
    """SGLang's own arguments of the command, made checkable on this machine.

    `--device cpu` is added when no device is given (resolution otherwise probes for a GPU);
    model paths absent here become stand-in config-only folders under `scratch`.
    """
    parsed = parse_launch_command(command_text, _takes_value())
    if parsed is None:
        raise ValueError("no SGLang launch found in the command")
    canonical = _canonical()
    algorithm = (parsed.get(_ALGORITHM_FLAG) or "").upper()
    context = _context_length(parsed.get(_CONTEXT_FLAG))
    argv: list[str] = list(parsed.positionals)
    for argument in parsed.arguments:
        long = canonical(argument.flag)
        value = argument.value
        if value is not None and long in (_MODEL_FLAG, _DRAFT_FLAG) and not Path(value).exists():
            value = str(_stand_in(scratch, long, algorithm, context))
        argv.extend(_words(argument, value))
    if not any(canonical(a.flag) == "--device" for a in parsed.arguments):
        argv.extend(["--device", "cpu"])
    return argv


def _words(argument: Argument, value: str | None) -> list[str]:
    if value is None:
        return [argument.flag]
    return [f"{argument.flag}={value}"] if argument.joined else [argument.flag, value]


def _context_length(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def _stand_in(scratch: Path, flag: str, algorithm: str, context: int | None = None) -> Path:
    """A folder with just a config.json shaped like the model the flag names.

    The real model's context length is unknown here: the stand-in's is at least the
    command's --context-length, so SGLang's check against the model's own does not refuse
    what the real model may allow.
    """
    if flag == _MODEL_FLAG:
        name, config = "target", TARGET_CONFIG
    elif algorithm == "EAGLE3":
        name, config = "eagle3-draft", EAGLE3_DRAFT_CONFIG
    else:
        name, config = "eagle-draft", EAGLE_DRAFT_CONFIG
    positions = int(str(config["max_position_embeddings"]))
    if context is not None and context > positions:
        config = {**config, "max_position_embeddings": context}
    folder = scratch / name
    folder.mkdir(exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config, indent=2) + "\n", "utf-8")
    return folder


def _takes_value():
    """The catalog's idea of which flags take a value, or None to let the lexer guess."""
    from analyzer.sglang.catalog import CatalogError, load_catalog

    try:
        return load_catalog().takes_value
    except CatalogError:
        return None


def _canonical():
    """Typed flag -> its long name per the catalog (aliases and prefixes), else itself."""
    from analyzer.sglang.catalog import CatalogError, load_catalog

    try:
        catalog = load_catalog()
    except CatalogError:
        return lambda flag: flag

    def long(flag: str) -> str:
        spec = catalog.spec(flag)
        return spec.long if spec is not None else flag

    return long


def _run(
    python: str, argv: list[str], timeout: float, start: float, pythonpath: str | None = None
) -> Verification:
    """One subprocess of SGLang's Python; its process group is killed on timeout."""
    env = _sglang_env(pythonpath)
    try:
        proc = subprocess.Popen(
            [python, "-c", VERIFY_SNIPPET, *argv],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            start_new_session=True,
        )
    except OSError as exc:
        message = f"cannot run {python}: {exc.strerror or exc}; only the flag catalog check applies"
        return Verification("unavailable", None, message, time.monotonic() - start)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        message = f"sglang did not finish validating within {timeout:g} s"
        return Verification("timeout", None, message, time.monotonic() - start)
    stdout = out.decode("utf-8", errors="replace")
    stderr = err.decode("utf-8", errors="replace")
    return _judge(proc.returncode, stdout, stderr, time.monotonic() - start)


def _sglang_env(pythonpath: str | None) -> dict[str, str]:
    """No SGLANG_* settings of ours, no hub access; another release first on the path."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SGLANG_")}
    env.update(PYTHONUNBUFFERED="1", HF_HUB_OFFLINE="1")
    if pythonpath:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (pythonpath, env.get("PYTHONPATH")) if p)
    return env


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.communicate()


def _judge(code: int, stdout: str, stderr: str, seconds: float) -> Verification:
    """Pass, fail or unavailable from the exit status, the markers and SGLang's output."""
    version = None
    for line in stdout.splitlines():
        if line.startswith(VERSION_MARKER):
            version = line[len(VERSION_MARKER) :].strip()
        elif line.startswith(IMPORT_FAILED_MARKER):
            broken = line[len(IMPORT_FAILED_MARKER) :].strip()
            message = f"sglang cannot be imported ({broken}); only the flag catalog check applies"
            return Verification("unavailable", None, message, seconds)
    if code == 0 and VERIFY_MARKER in stdout:
        return Verification("pass", version, "", seconds)
    if version is None:
        last = _last_line(stderr) or f"exit status {code}"
        message = f"sglang cannot be run ({last}); only the flag catalog check applies"
        return Verification("unavailable", None, message, seconds)
    return Verification("fail", version, sglang_message(stderr) or f"exit status {code}", seconds)


def sglang_message(stderr: str) -> str:
    """SGLang's own words: the argparse error line, else the last exception line."""
    lines = [line.rstrip() for line in stderr.splitlines() if line.strip()]
    for line in reversed(lines):
        if _ARGPARSE_ERROR.match(line):
            return line
    for line in reversed(lines):
        if _EXCEPTION_LINE.match(line):
            return line
    return lines[-1] if lines else ""


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""
