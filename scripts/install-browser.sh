#!/usr/bin/env bash
# Install what tests/test_html_browser.py needs: Debian's chromium and python playwright.
#
# Idempotent: each step is skipped when its result is already there. Playwright's own browser
# download (`playwright install`) is never used: the test drives /usr/bin/chromium.
# Usage: scripts/install-browser.sh [PYTHON]   (default: .venv/bin/python of this checkout)
set -euo pipefail
cd "$(dirname "$0")/.."
python="${1:-.venv/bin/python}"

if [ ! -x /usr/bin/chromium ]; then
    export DEBIAN_FRONTEND=noninteractive
    sudo_cmd=""
    [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
    $sudo_cmd apt-get update -qq
    $sudo_cmd apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
fi

if ! "$python" -c "import playwright.sync_api" 2>/dev/null; then
    "$python" -m pip install -q "playwright>=1.40"
fi

echo "browser ready: $(/usr/bin/chromium --version 2>/dev/null || echo chromium?)," \
    "playwright $("$python" -c 'from importlib.metadata import version; print(version("playwright"))')"
