"""Frames as evidence of a flag (analyzer/sglang/guarded_code_build.py, catalogs/
guarded-VERSION.json, analyzer/blame/guarded_frames.py): code SGLang runs only when a flag is
set, and a traceback through it naming that flag unless the shown command leaves it off."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest

from analyzer.pipeline import Options, analyze
from analyzer.sglang.guarded_code import GuardedCode, guarded_code_for, shipped_guarded_versions
from analyzer.sglang.guarded_code_build import build_guarded_code

ROOT = Path(__file__).resolve().parent.parent
CATALOGS = ROOT / "analyzer" / "catalogs"
RELEASES = ROOT / ".sglang" / "releases"
SITE = "/usr/local/lib/python3.12/dist-packages"
HICACHE = "--enable-hierarchical-cache"
# 0.5.6.post2 managers/scheduler.py init_cache_with_memory_pool builds HiRadixCache only
# under `elif self.enable_hierarchical_cache:`, and HiRadixCache.__init__ the host pool: a
# paste cut to the pool's frame (features.toml knows hiradix_cache.py frames, not this one)
HICACHE_CRASH = f"""[2025-12-01 09:00:10 TP0] Scheduler hit an exception: Traceback (most recent call last):
  File "{SITE}/sglang/srt/managers/scheduler.py", line 2573, in run_scheduler_process
    scheduler = Scheduler(
  File "{SITE}/sglang/srt/mem_cache/memory_pool_host.py", line 118, in __init__
    self.kv_buffer = self.init_kv_buffer()
RuntimeError: unexpected layout of the device pool
"""
GRAMMAR_CRASH = f"""[2025-12-01 09:00:10 TP0] Scheduler hit an exception: Traceback (most recent call last):
  File "{SITE}/sglang/srt/managers/scheduler.py", line 2573, in run_scheduler_process
    scheduler.event_loop_overlap()
  File "{SITE}/sglang/srt/constrained/llguidance_backend.py", line 60, in __init__
    self.ll_matcher = LLMatcher(self.ll_tokenizer, serialized_grammar)
RuntimeError: grammar compilation failed
"""
LAUNCH = "python -m sglang.launch_server --model-path org/model --port 30000 --tp-size 2"
# the default branch of scheduler.py: RadixCache when neither chunked nor hierarchical cache
RADIX_CRASH = f"""[2025-12-01 09:00:10 TP0] Scheduler hit an exception: Traceback (most recent call last):
  File "{SITE}/sglang/srt/managers/scheduler.py", line 2573, in run_scheduler_process
    scheduler = Scheduler(
  File "{SITE}/sglang/srt/mem_cache/radix_cache.py", line 120, in __init__
    self.reset()
RuntimeError: unexpected layout of the device pool
"""


def _release_homes() -> list[Path]:
    """Where scripts/install-sglang.sh put older releases: in this checkout, or beside the
    SGLang Python the sglang-marked run is given (<home>/venv/bin/python)."""
    homes = [RELEASES]
    python = os.environ.get("LOGANALYZE_SGLANG_PYTHON")
    if python:
        homes.append(Path(python).parent.parent.parent / "releases")
    return homes


def _release(version: str) -> Path:
    for base in _release_homes():
        if (base / version / "sglang").is_dir():
            return base / version / "sglang"
    pytest.skip(f"sglang {version} source is not installed")


def _catalog(version: str) -> dict:
    return json.loads((CATALOGS / f"sglang-{version}.json").read_text("utf-8"))


def _incident(tmp_path: Path, text: str, version: str | None = "0.5.6.post2") -> dict:
    log = tmp_path / "paste.log"
    log.write_text(text, encoding="utf-8")
    report = analyze([str(log)], Options(sglang_version=version))
    causes = [i for i in report.incidents if i.severity in ("fatal", "error")]
    assert causes, report.incidents
    return {"flags": causes[0].offending_flags, "explanation": causes[0].explanation}


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    package = tmp_path / "sglang"
    (package / "srt").mkdir(parents=True)
    (package / "version.py").write_text('__version__ = "9.9.9"\n', encoding="utf-8")
    for rel, text in files.items():
        path = package / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    return package


FLAGS = {
    "sglang_version": "9.9.9",
    "options": [
        {"dest": "enable_cache", "option_strings": ["--enable-cache"], "default": False},
        {"dest": "backend", "option_strings": ["--backend"], "default": "auto"},
        {"dest": "disable_radix", "option_strings": ["--disable-radix"], "default": False},
        {"dest": "page_size", "option_strings": ["--page-size"], "default": None},
    ],
}


def test_guard_reaches_a_class_through_the_class_that_builds_it(tmp_path):
    """`Pool` is built only by `Cache`, which the scheduler builds only under `if
    server_args.enable_cache`: both are guarded, with the scheduler's guard as the site."""
    package = _package(
        tmp_path,
        {
            "srt/scheduler.py": """
                from sglang.srt.cache import Cache, Plain
                class Scheduler:
                    def __init__(self, server_args):
                        if server_args.enable_cache:
                            self.cache = Cache()
                        elif not server_args.disable_radix:
                            self.cache = Plain()
                        if isinstance(self.cache, Cache):
                            pass
                def run(server_args):
                    return Scheduler(server_args)
            """,
            "srt/cache.py": """
                class Pool:
                    def alloc(self):
                        self.buffer = None
                class Cache:
                    def __init__(self):
                        self.pool = Pool()
                    def lookup(self):
                        pass
                class Plain:
                    def __init__(self):
                        pass
                    def plain_only(self):
                        pass
            """,
        },
    )
    files = build_guarded_code(package, FLAGS)["files"]
    cache = files["srt/cache.py"]
    needs = [{"needs": [["--enable-cache", "truthy", None]], "site": "srt/scheduler.py:6"}]
    assert cache["alloc"] == needs  # Pool, through Cache
    assert cache["lookup"] == needs  # isinstance is no use: Cache stays guarded
    # Plain runs on the default branch (`not disable_radix` holds for the default), and
    # `__init__` is Plain's too
    assert "plain_only" not in cache and "__init__" not in cache
    assert "srt/scheduler.py" not in files


def test_guarded_and_unguarded_uses_and_cycles(tmp_path):
    """A name used once unguarded is not guarded; one used only by itself is not; nor one
    guarded by an order comparison of a None default; a use in the package's own tests says
    nothing; an `== value` guard is kept with its value."""
    package = _package(
        tmp_path,
        {
            "srt/entry.py": """
                from sglang.srt.parts import Fast, Slow, loop, Paged
                def start(server_args):
                    if server_args.backend == "fast":
                        Fast()
                    if server_args.page_size <= 1:
                        Paged()
                    Slow()
                    if server_args.enable_cache:
                        return
                    Slow()
            """,
            "srt/parts.py": """
                class Fast:
                    def go(self):
                        pass
                class Slow:
                    def crawl(self):
                        pass
                def loop():
                    return loop()
                class Paged:
                    def alloc(self):
                        pass
            """,
            "srt/test_parts.py": """
                from sglang.srt.parts import Fast
                Fast()
            """,
        },
    )
    files = build_guarded_code(package, FLAGS)["files"]
    parts = files["srt/parts.py"]
    assert parts["go"] == [{"needs": [["--backend", "eq", "fast"]], "site": "srt/entry.py:5"}]
    assert "crawl" not in parts  # Slow() runs unguarded first
    assert "loop" not in parts  # used only by itself
    assert "alloc" not in parts  # `page_size <= 1` of a None default SGLang fills itself


def test_mined_from_an_installed_release_real_source():
    """0.5.6.post2 as shipped: HiRadixCache's methods run only with the hierarchical cache
    (the scheduler's guard); RadixCache, the default branch, is not guarded."""
    _release("0.5.6.post2")
    assert "0.5.6.post2" in shipped_guarded_versions()
    code = guarded_code_for("0.5.6.post2")
    guards = code.guards(f"{SITE}/sglang/srt/mem_cache/hiradix_cache.py", "__init__")
    assert [g.flags for g in guards] == [(HICACHE,)]
    assert guards[0].site.startswith("srt/managers/scheduler.py:")
    assert code.guards(f"{SITE}/sglang/srt/mem_cache/radix_cache.py", "__init__") == []
    assert code.guards(f"{SITE}/sglang/srt/managers/scheduler.py", "event_loop_normal") == []


def test_shipped_map_is_what_the_builder_gives():
    package = _release("0.5.6.post2")
    built = build_guarded_code(package, _catalog("0.5.6.post2"))
    shipped = json.loads((CATALOGS / "guarded-0.5.6.post2.json").read_text("utf-8"))
    assert built["files"] == shipped["files"]


def test_frame_through_guarded_code_names_the_flag_the_command_sets(tmp_path):
    incident = _incident(tmp_path, f"{LAUNCH} {HICACHE}\n{HICACHE_CRASH}")
    assert HICACHE in incident["flags"]
    assert "memory_pool_host.py" in incident["explanation"]
    assert "runs only with it set" in incident["explanation"]


def test_frame_through_guarded_code_with_no_command_names_the_flag(tmp_path):
    """No command: the one way into the llguidance backend needs `--grammar-backend
    llguidance` (0.5.6.post2 constrained/base_grammar_backend.py create_grammar_backend)."""
    incident = _incident(tmp_path, GRAMMAR_CRASH)
    assert "--grammar-backend" in incident["flags"]
    assert "llguidance_backend.py" in incident["explanation"]


def test_command_with_another_value_proves_the_way_not_taken(tmp_path):
    """Negative: the command gives --grammar-backend a value the guard rules out."""
    incident = _incident(tmp_path, f"{LAUNCH} --grammar-backend xgrammar\n{GRAMMAR_CRASH}")
    assert "--grammar-backend" not in incident["flags"]


def test_no_command_and_two_ways_in_names_neither(tmp_path):
    """Negative: the host pool is built for the hierarchical cache or for decode-side KV
    offloading; with no command nothing says which."""
    incident = _incident(tmp_path, HICACHE_CRASH)
    assert HICACHE not in incident["flags"]
    assert "--disaggregation-decode-enable-offload-kvcache" not in incident["flags"]


def test_command_without_the_flag_proves_it_off(tmp_path):
    """Negative: the shown command does not set the flag (its default is off)."""
    incident = _incident(tmp_path, f"{LAUNCH}\n{HICACHE_CRASH}")
    assert HICACHE not in incident["flags"]
    assert "runs only with it set" not in incident["explanation"]


def test_server_args_record_with_the_flag_false_proves_it_off(tmp_path):
    record = (
        "[2025-12-01 09:00:00] server_args=ServerArgs(model_path='org/model', tp_size=2, "
        "enable_hierarchical_cache=False, port=30000)\n"
    )
    incident = _incident(tmp_path, record + HICACHE_CRASH)
    assert HICACHE not in incident["flags"]


# create_grammar_backend wraps the grammar backend in ReasonerGrammarBackend only when
# server_args.reasoning_parser is set (constrained/base_grammar_backend.py, every release)
REASONER_CRASH = f"""[2025-12-01 09:00:10 TP0] Scheduler hit an exception: Traceback (most recent call last):
  File "{SITE}/sglang/srt/managers/scheduler.py", line 2573, in run_scheduler_process
    scheduler = Scheduler(
  File "{SITE}/sglang/srt/constrained/reasoner_grammar_backend.py", line 80, in __init__
    self.think_end_id = think_end_id
RuntimeError: unexpected tokenizer state
"""


@pytest.mark.parametrize("version", ["0.5.6.post2", "0.5.23"])
def test_reasoner_grammar_frames_name_the_reasoning_parser(tmp_path, version):
    incident = _incident(tmp_path, REASONER_CRASH, version)
    assert "--reasoning-parser" in incident["flags"]
    assert "reasoner_grammar_backend.py" in incident["explanation"]
    # negative: a command that leaves the parser unset proves the wrapper was not built
    incident = _incident(tmp_path, f"{LAUNCH}\n{REASONER_CRASH}", version)
    assert "--reasoning-parser" not in incident["flags"]


def test_frames_through_unguarded_code_name_nothing(tmp_path):
    """Negative: the default radix cache runs for everyone: no flag from its frames."""
    incident = _incident(tmp_path, RADIX_CRASH)
    assert HICACHE not in incident["flags"]
    assert "runs only with it set" not in incident["explanation"]


def test_unknown_release_reads_the_newest_map_that_knows_the_file():
    """A newer release listing the file but not the function runs that function unguarded:
    an older release's guard is not used for it."""
    entry = [{"needs": [["--enable-cache", "truthy", None]], "site": "srt/s.py:3"}]
    code = GuardedCode(
        [
            ("2.0", {"srt/cache.py": {"other": entry}}),
            ("1.0", {"srt/cache.py": {"alloc": entry}, "srt/old.py": {"run": entry}}),
        ]
    )
    assert code.guards(f"{SITE}/sglang/srt/cache.py", "alloc") == []
    [guard] = code.guards(f"{SITE}/sglang/srt/old.py", "run")
    assert (guard.flags, guard.release) == (("--enable-cache",), "1.0")
    assert code.guards("/home/me/app.py", "run") == []
