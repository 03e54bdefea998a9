#!/usr/bin/env bash
# Real SGLang for the tests marked `sglang`, `loganalyze verify` and the fixture generators,
# kept out of the project's venv (SGLang pins its own torch and transformers):
#   .sglang/venv                  sglang 0.5.23 with the CPU requirement set (torch from disk)
#   .sglang/releases/<version>    older releases, `pip install --no-deps --target`, run with
#                                 PYTHONPATH=<that folder> on the same venv's Python
# Idempotent: a finished step leaves a marker and is skipped next time. LOGANALYZE_SGLANG_HOME
# moves the folder. pip retries on the registry so one slow answer does not fail CI.
set -euo pipefail
cd "$(dirname "$0")/.."
HOME_DIR="${LOGANALYZE_SGLANG_HOME:-.sglang}"
PIP=(--quiet --disable-pip-version-check --retries 5 --timeout 60)

venv="$HOME_DIR/venv"
if [ ! -f "$venv/.loganalyze-ready" ]; then
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install "${PIP[@]}" -r scripts/sglang-0.5.23-cpu-requirements.txt 2>&1 \
        | grep -v "^WARNING: Location" || true
    "$venv/bin/pip" install "${PIP[@]}" --no-deps sglang==0.5.23
    "$venv/bin/python" -W ignore -c "import sglang.srt.server_args" >/dev/null
    touch "$venv/.loganalyze-ready"
fi

# An older release, plus what its import needs that differs from 0.5.23's set.
release() {
    local version="$1"; shift
    local dir="$HOME_DIR/releases/$version"
    [ -f "$dir/.loganalyze-ready" ] && return 0
    rm -rf "$dir"
    "$venv/bin/pip" install "${PIP[@]}" --no-deps --target "$dir" "sglang==$version" "$@"
    PYTHONPATH="$dir" "$venv/bin/python" -W ignore -c "import sglang.srt.server_args" >/dev/null
    touch "$dir/.loganalyze-ready"
}
release 0.5.6.post2
release 0.5.10.post1
release 0.5.13 transformers==5.8.1 "tokenizers>=0.22,<=0.23.0" "huggingface-hub>=1.5,<2"
release 0.5.19 transformers==5.12.1 tokenizers==0.22.2 "huggingface-hub>=1.5,<2"
echo "sglang ready: $venv/bin/python (older releases in $HOME_DIR/releases)"
