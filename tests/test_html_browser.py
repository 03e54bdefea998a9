"""The HTML report in a real browser: Debian's chromium driven by playwright, page opened from
disk as a user would double-click it.

Needs /usr/bin/chromium and the python `playwright` package (scripts/install-browser.sh
installs both; playwright's own browser download is never used). Screenshots go to
tests/artifacts/ for a human to look at.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from analyzer.formats.html import render_html
from analyzer.pipeline import Options, analyze, charted
from tests.fixture_cases import fixture_cases

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ARTIFACTS = Path(__file__).parent / "artifacts"
ARGPARSE_CASE = "real/unrecognized_num_speculative_tokens"
XSS_LINES = [
    "[2026-03-02 10:01:15 TP0] Address already in use: <script>window.__xss = 1</script>",
    '[2026-03-02 10:01:16 TP1] Address already in use: <img src=x onerror="window.__xss = 2">',
]

if not Path(CHROMIUM).is_file():
    pytest.skip(
        f"{CHROMIUM} is not installed (scripts/install-browser.sh installs it)",
        allow_module_level=True,
    )
sync_api = pytest.importorskip(
    "playwright.sync_api", reason="python playwright is not installed (scripts/install-browser.sh)"
)


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


@pytest.fixture(scope="module")
def report_file(tmp_path_factory):
    """A real argparse failure (with its corrected command) and a log whose lines try to
    inject markup."""
    folder = tmp_path_factory.mktemp("report")
    hostile = folder / "hostile.log"
    hostile.write_text("\n".join(XSS_LINES) + "\n", encoding="utf-8")
    case = next(c for c in fixture_cases() if c.id == ARGPARSE_CASE)
    report = analyze([str(case.input), str(hostile)], Options(command=case.user_command))
    page = folder / "report.html"
    page.write_text(render_html(report), encoding="utf-8")
    return page, report


class PageWatch:
    """Everything the page asked the network for, and everything it complained about."""

    def __init__(self, page, allowed: str) -> None:
        self.requests: list[str] = []
        self.errors: list[str] = []
        page.on("console", lambda m: m.type == "error" and self.errors.append(m.text))
        page.on("pageerror", lambda e: self.errors.append(str(e)))
        page.route("**/*", self._route(allowed))

    def _route(self, allowed: str):
        def handle(route):
            self.requests.append(route.request.url)
            if route.request.url == allowed:
                route.continue_()
            else:
                route.abort()

        return handle


def _open(browser, page_file: Path, **context_options):
    context = browser.new_context(viewport={"width": 1280, "height": 900}, **context_options)
    page = context.new_page()
    url = page_file.as_uri()
    watch = PageWatch(page, url)
    page.goto(url)
    page.wait_for_load_state("load")
    return context, page, watch, url


def test_page_loads_clean_and_offline(browser, report_file):
    page_file, report = report_file
    context, page, watch, url = _open(browser, page_file)
    try:
        assert watch.requests == [url]
        assert watch.errors == []
        cards = page.locator("article.incident")
        assert cards.count() == len(report.incidents) >= 2
        for index, incident in enumerate(report.incidents):
            card = cards.nth(index)
            assert card.is_visible()
            assert incident.title in card.locator("h2").inner_text()
        assert page.locator("section.timeline li").count() == len(report.incidents)
        assert page.locator("mark").first.is_visible()
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "report-light.png"), full_page=True)
    finally:
        context.close()


def test_hostile_log_lines_show_as_text_and_never_run(browser, report_file):
    page_file, _ = report_file
    context, page, watch, _ = _open(browser, page_file)
    try:
        assert page.evaluate("window.__xss") is None
        body = page.locator("body").inner_text()
        assert "<script>window.__xss = 1</script>" in body
        assert '<img src=x onerror="window.__xss = 2">' in body
        assert page.locator("article img").count() == 0
        assert page.locator("script").count() == 1
        assert watch.errors == []
    finally:
        context.close()


def test_copy_button_copies_the_corrected_command(browser, report_file):
    page_file, report = report_file
    expected = report.incidents[0].corrected_command
    assert expected
    context, page, watch, _ = _open(
        browser, page_file, permissions=["clipboard-read", "clipboard-write"]
    )
    try:
        button = page.locator("article.incident").first.locator("button.copy")
        button.click()
        page.wait_for_function("document.querySelector('button.copy.done') !== null")
        assert button.inner_text() == "Copied \u2713"
        assert button.get_attribute("data-copied") == expected
        assert page.evaluate("navigator.clipboard.readText()") == expected
        assert watch.errors == []
    finally:
        context.close()


def test_dark_theme_and_print_view(browser, report_file):
    page_file, _ = report_file
    context, page, watch, _ = _open(browser, page_file, color_scheme="dark")
    try:
        background = page.evaluate("getComputedStyle(document.body).backgroundColor")
        assert background == "rgb(14, 17, 22)"
        page.screenshot(path=str(ARTIFACTS / "report-dark.png"), full_page=True)
        page.evaluate("window.dispatchEvent(new Event('beforeprint'))")
        assert page.locator("details:not([open])").count() == 0
        page.emulate_media(media="print")
        assert page.locator("button.copy").first.is_hidden()
        background = page.evaluate("getComputedStyle(document.body).backgroundColor")
        assert background == "rgb(255, 255, 255)"
        assert watch.errors == []
    finally:
        context.close()


def test_no_incident_page(browser, tmp_path):
    log = tmp_path / "healthy.log"
    log.write_text("[2026-03-02 10:00:00] The server is fired up and ready to roll!\n", "utf-8")
    page_file = tmp_path / "clear.html"
    page_file.write_text(render_html(analyze([str(log)])), encoding="utf-8")
    context, page, watch, url = _open(browser, page_file)
    try:
        assert page.locator("h1").inner_text() == "No incident found"
        assert page.locator("article.incident").count() == 0
        assert watch.requests == [url] and watch.errors == []
        page.screenshot(path=str(ARTIFACTS / "report-clear.png"), full_page=True)
    finally:
        context.close()


def test_metrics_charts_draw_offline_in_both_themes(browser, tmp_path):
    log = Path(__file__).parent.parent / "fixtures/metrics/sglang-0.5.23-eagle3.log"
    page_file = tmp_path / "metrics.html"
    page_file.write_text(render_html(charted([str(log)])), "utf-8")
    for scheme in ("light", "dark"):
        context, page, watch, url = _open(browser, page_file, color_scheme=scheme)
        try:
            charts = page.locator("section.metrics figure.chart svg")
            assert charts.count() == 2
            for index in range(2):
                box = charts.nth(index).bounding_box()
                assert box and box["width"] > 300 and box["height"] > 100
            assert charts.first.locator("polyline").count() >= 1
            label = charts.first.locator("text:not([fill])").first
            colour = label.evaluate("e => getComputedStyle(e).fill")
            body = page.evaluate("getComputedStyle(document.body).color")
            assert colour == body  # axis labels follow the theme's text colour
            assert watch.requests == [url] and watch.errors == []
            page.locator("section.metrics").screenshot(
                path=str(ARTIFACTS / f"report-metrics-{scheme}.png")
            )
        finally:
            context.close()


def test_compare_page_draws_offline_without_script(browser, tmp_path):
    from analyzer.formats.compare_html import render_compare_html
    from analyzer.metrics.compare import compare
    from analyzer.metrics.extract import extract_paths

    folder = Path(__file__).parent.parent / "fixtures/metrics"
    logs = [str(folder / n) for n in ("sglang-0.5.23-eagle3.log", "sglang-0.5.23-no-spec.log")]
    page_file = tmp_path / "compare.html"
    page_file.write_text(render_compare_html(compare(extract_paths(logs))), "utf-8")
    context, page, watch, url = _open(browser, page_file)
    try:
        assert page.locator("table.runs tr").count() == 3
        assert page.locator("table.runs tr.best td").nth(1).inner_text().endswith("no-spec.log")
        charts = page.locator("figure.chart svg")
        assert charts.count() == 2 and charts.first.locator("polyline").count() == 2
        assert page.locator("script").count() == 0
        assert watch.requests == [url] and watch.errors == []
        page.screenshot(path=str(ARTIFACTS / "compare.png"), full_page=True)
    finally:
        context.close()
