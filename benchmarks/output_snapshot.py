"""A digest of the JSON report of every fixture input: proof that a change kept the output.

    python benchmarks/output_snapshot.py --save     # record the digests (before a change)
    python benchmarks/output_snapshot.py            # compare with the recorded ones

Speed work must not change a byte of the report. This runs the analyzer's JSON report
(`render_json(analyze(...))`, what `loganalyze --format json` prints) over every input under
fixtures/ (every subfolder: real, versions, wild, negative, source, transcripts, metrics):
the input a sidecar names (with the sidecar's recorded command given as `--command`, as the
fixture runner does, and once more without it), and every log, text or transcript file no
sidecar claims. Each report is hashed (sha256); an input the analyzer refuses is hashed by its
error text. Only digests and input names are printed, never an input's contents.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from analyzer.formats.json_report import render_json  # noqa: E402
from analyzer.pipeline import Options, analyze  # noqa: E402

FIXTURES = ROOT / "fixtures"
DEFAULT_STORE = ROOT / "benchmarks" / "out" / "output_snapshot.json"
INPUT_SUFFIXES = (".log", ".txt", ".json", ".jsonl", ".gz", ".zst")
NOT_INPUTS = {"held_out.txt", "README.md"}


def _sidecar_input(sidecar: Path, fixture: dict) -> Path | None:
    if "input" in fixture:
        return sidecar.parent / fixture["input"]
    for candidate in sorted(sidecar.parent.glob(sidecar.stem + ".*")):
        if candidate.suffix != ".toml" and candidate.is_file():
            return candidate
    return None


def runs() -> list[tuple[str, Path, Options]]:
    """(key, input, options) for every report to digest, in a fixed order."""
    found: list[tuple[str, Path, Options]] = []
    claimed: set[Path] = set()
    folders: list[Path] = []  # a transcript folder's files belong to its sidecar's input
    for sidecar in sorted(FIXTURES.rglob("*.toml")):
        if "models" in sidecar.relative_to(FIXTURES).parts:
            continue
        fixture = tomllib.loads(sidecar.read_text("utf-8")).get("fixture", {})
        path = _sidecar_input(sidecar, fixture)
        if path is None or not path.exists():
            continue
        claimed.add(path.resolve())
        if (sidecar.parent / sidecar.stem).is_dir():
            folders.append((sidecar.parent / sidecar.stem).resolve())
        key = str(path.relative_to(FIXTURES))
        found.append((key, path, Options(input_format=fixture.get("input_format"))))
        command = fixture.get("command")
        if command and not fixture.get("command_in_log") and not fixture.get("input_format"):
            found.append((key + " [--command]", path, Options(command=command)))
    for path in sorted(FIXTURES.rglob("*")):
        resolved = path.resolve()
        if (
            not path.is_file()
            or path.name in NOT_INPUTS
            or not path.name.endswith(INPUT_SUFFIXES)
            or "models" in path.relative_to(FIXTURES).parts
            or resolved in claimed
            or any(resolved.is_relative_to(folder) for folder in folders)
        ):
            continue
        found.append((str(path.relative_to(FIXTURES)), path, Options()))
    return found


def digest(path: Path, options: Options) -> str:
    try:
        text = render_json(analyze([str(path)], options))
    except Exception as error:  # an input the analyzer refuses: its message is the output
        text = f"{type(error).__name__}: {error}"
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--save", action="store_true", help="record instead of compare")
    parser.add_argument("--store", type=Path, default=DEFAULT_STORE)
    args = parser.parse_args()
    digests = {key: digest(path, options) for key, path, options in runs()}
    if args.save:
        args.store.parent.mkdir(parents=True, exist_ok=True)
        args.store.write_text(json.dumps(digests, indent=1, sort_keys=True) + "\n", "utf-8")
        print(f"saved {len(digests)} digests to {args.store}")
        return 0
    recorded = json.loads(args.store.read_text("utf-8"))
    changed = sorted(k for k in digests.keys() & recorded.keys() if digests[k] != recorded[k])
    new = sorted(digests.keys() - recorded.keys())
    gone = sorted(recorded.keys() - digests.keys())
    for label, keys in (("changed", changed), ("new (not recorded)", new), ("gone", gone)):
        for key in keys:
            print(f"{label}: {key}")
    same = len(digests.keys() & recorded.keys()) - len(changed)
    print(f"{same} of {len(recorded)} recorded reports byte-identical; {len(changed)} changed")
    return 1 if changed or gone else 0


if __name__ == "__main__":
    sys.exit(main())
