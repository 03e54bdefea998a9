"""Secrets never reach a report unless --no-redact; every format is covered."""

from __future__ import annotations

import pytest

from analyzer.engine.redact import redact_text
from analyzer.formats.json_report import render_json
from analyzer.formats.terminal import render_plain
from analyzer.pipeline import Options, analyze

SECRETS = [
    "hf_AbCdEfGhIjKlMnOpQrStUvWx",
    "sk-proj-1234567890abcdefghij",
    "eyJhbGciOiJIUzI1NiJ9.payload.sig",
    "hunter2pass",
    "s3cr3t-admin-key",
]
LOG = f"""+ HF_TOKEN={SECRETS[0]} python -m sglang.launch_server --model-path /m --api-key {SECRETS[4]} --num-speculative-tokens 4
[2026-01-01 10:00:00] fetching https://user:{SECRETS[3]}@mirror.example/models with Authorization: Bearer {SECRETS[2]}
[2026-01-01 10:00:00] OPENAI_API_KEY={SECRETS[1]}
usage: sglang serve [-h] --model-path MODEL_PATH
sglang serve: error: unrecognized arguments: --num-speculative-tokens 4
"""


def _html(report):
    from analyzer.formats.html import render_html

    return render_html(report)


def _markdown(report):
    from analyzer.formats.markdown import render_markdown

    return render_markdown(report)


def _junit(report):
    from analyzer.formats.junit import render_junit

    return render_junit(report)


def _annotations(report):
    from analyzer.formats.github import render_annotations

    return render_annotations(report)


RENDERERS = {
    "json": render_json,
    "plain": render_plain,
    "html": _html,
    "markdown": _markdown,
    "junit": _junit,
    "github": _annotations,
}


@pytest.mark.parametrize("fmt", sorted(RENDERERS))
def test_secrets_are_masked_in_every_format(fmt, tmp_path):
    log = tmp_path / "run.log"
    log.write_text(LOG)
    report = analyze([str(log)])
    text = RENDERERS[fmt](report)
    assert report.incidents[0].corrected_command, "the command is still corrected"
    for secret in SECRETS:
        assert secret not in text, f"{secret} leaked into {fmt}"
    assert "***" in text


def test_no_redact_keeps_them(tmp_path):
    log = tmp_path / "run.log"
    log.write_text(LOG)
    text = render_json(analyze([str(log)], Options(redact=False)))
    assert SECRETS[0] in text and SECRETS[4] in text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("--api-key abc123", "--api-key ***"),
        ("--api-key=abc123 --port 1", "--api-key=*** --port 1"),
        ("--admin-api-key 'a b'", "--admin-api-key ***"),
        ("https://u:pw@host/x", "https://u:***@host/x"),
        ("token usage: 0.82", "token usage: 0.82"),
        ("#token: 2133", "#token: 2133"),
    ],
)
def test_redact_text(text, expected):
    assert redact_text(text) == expected
