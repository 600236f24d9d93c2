"""The status page (``GET /`` on the sidecar, ``--format html`` as a file) in a real headless browser:
Debian's chromium driven by its chromedriver through selenium, against the real CLI, the real sidecar
and the simulator (or the hostile stand-in) on loopback.

What a person must be able to rely on: the page renders; the verdict it shows is the report's; a failing
check's remedy is visible on screen; a partial pass says so; nothing secret is in the page; and text a
server supplied (quoted in a check's evidence) stays text: it cannot end the page's markup, run a script
or add an element.
"""

from __future__ import annotations

import html
import importlib.util
import json
import shutil
import sys
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support import web
from tests.support.check_helpers import evidence_files, run_check
from tests.support.daemon_process import daemon_process, wait_for
from tests.support.hostile_server import MARKUP_MESSAGE, hostile_process
from tests.support.prerequisite import missing
from tests.support.sglang_wheel import CACHE
from tests.support.sim_process import sim_process

FAST = ["--interval", "1", "--health-interval", "0.3", "--probe-interval", "2", "--wait", "15"]


def _tool(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        missing(f"{name} not found (Debian packages chromium and chromium-driver provide it)")
    return found


# .ci/run installs pyproject's `browser` extra (selenium) here, off the tests' environment
BROWSER_TOOLS = CACHE / "browser-tools"


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Chromium under selenium: selenium from the environment, else from .ci/run's directory for it (on
    this process's path for the module's tests only; the tests' children never see it)."""
    added = False
    if importlib.util.find_spec("selenium") is None:
        if not BROWSER_TOOLS.is_dir():
            missing("selenium is not installed (pip install -e '.[browser]')")
        sys.path.append(str(BROWSER_TOOLS))
        added = True
    try:
        yield from _chromium()
    finally:
        if added:
            sys.path.remove(str(BROWSER_TOOLS))


def _chromium() -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = _tool("chromium")
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        opts.add_argument(arg)
    opts.add_argument("--window-size=1200,1000")
    driver = webdriver.Chrome(service=Service(executable_path=_tool("chromedriver")), options=opts)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


def _by_css(driver: Any, css: str) -> Any:
    from selenium.webdriver.common.by import By

    return driver.find_element(By.CSS_SELECTOR, css)


def _all_css(driver: Any, css: str) -> list[Any]:
    from selenium.webdriver.common.by import By

    return list(driver.find_elements(By.CSS_SELECTOR, css))


def _row(driver: Any, check_id: str) -> Any:
    return next(r for r in _all_css(driver, "tr.check") if r.get_attribute("id") == f"check-{check_id}")


class _Tags(HTMLParser):
    """Every start tag of a document, to hold the page's markup to what the renderer writes."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)


ALLOWED_TAGS = {
    "html", "head", "meta", "title", "style", "body", "main", "header", "h1", "h2", "p", "span", "section",
    "div", "ul", "li", "b", "table", "tr", "td", "dl", "dt", "dd", "code", "details", "summary", "footer",
    "svg", "line", "text", "polyline", "circle",
}  # fmt: skip


def test_the_html_file_renders_with_the_reports_verdict_and_a_visible_remedy(
    tmp_path: Path, browser: Any
) -> None:
    """``check --format html`` against a server that runs the wrong MoE backend and echoes its API key in
    ``/server_info`` (as SGLang does): the file shows the report's verdict, the failing check's remedy on
    screen, and never the key."""
    key = "sk-statusfile-" + "5" * 24
    key_file = tmp_path / "key"
    key_file.write_text(key + "\n")
    with sim_process(tmp_path, "--scenario", "backend-auto", "--api-key-file", str(key_file)) as sim:
        served = web.get(f"{sim.url}/server_info", headers={"Authorization": f"Bearer {key}"}, timeout=10)
        assert key in served.text  # the server really hands the key to whoever reads it
        env = {"SPARK_VALIDATE_API_KEY": key}
        args = ("--wait", "20", *evidence_files(sim))
        as_json = run_check(sim.url, *args, env=env)
        page = tmp_path / "report.html"
        run = run_check(sim.url, *args, "--format", "html", "--output", str(page), env=env, fmt="text")
    assert as_json.report is not None and as_json.rc == run.rc == 78, as_json.explain()
    report = as_json.report
    source = page.read_text()
    assert key not in source
    browser.get(page.as_uri())
    assert _by_css(browser, "#verdict-word").text == report["verdict"].upper() == "FAIL"
    assert _by_css(browser, "#verdict").get_attribute("data-verdict") == "fail"
    assert browser.title.startswith("spark-validate: FAIL")
    failing = next(c for c in report["checks"] if c["id"] == "moe.backend")
    assert failing["status"] == "fail" and failing["remedy"]
    remedy = _row(browser, "moe.backend").find_element("css selector", "dd.remedy")
    assert remedy.is_displayed() and remedy.text == failing["remedy"]
    assert remedy.size["height"] > 0 and remedy.location["y"] > 0  # laid out on the page, not hidden
    cov = report["coverage"]
    coverage = _by_css(browser, "#coverage").text
    assert f"proved {cov['proven']} of {cov['critical']} critical invariants" in coverage
    shown = {r.get_attribute("id")[len("check-") :] for r in _all_css(browser, "tr.check")}
    assert shown == {c["id"] for c in report["checks"]}
    assert key not in browser.page_source
    assert not browser.find_elements("css selector", "script, link, iframe, img, object, embed")
    browser.save_screenshot(str(tmp_path / "report.png"))


def test_hostile_evidence_stays_text_in_the_file_and_on_the_sidecars_page(
    tmp_path: Path, browser: Any
) -> None:
    with hostile_process("markup") as url:
        out = tmp_path / "hostile.html"
        run = run_check(url, "--format", "html", "--output", str(out), "--wait", "10", fmt="text")
        assert run.rc in (69, 78), run.stderr
        with daemon_process(tmp_path, url, *FAST) as d:
            assert wait_for(lambda: d.get("/report").status_code == 200, timeout=40), d.log()[-3000:]
            served = d.get("/")
            headers = served.headers
            browser.get(f"{d.base}/")
            served_title = browser.title
            served_text = _by_css(browser, "body").text
            served_pwned = browser.find_elements("css selector", "#pwned, script, img")
    assert headers["content-type"] == "text/html; charset=utf-8"
    assert "script-src" not in headers["content-security-policy"]  # default-src 'none': no script at all
    assert "default-src 'none'" in headers["content-security-policy"]
    for source in (out.read_text(), served.text):
        assert MARKUP_MESSAGE not in source  # never written raw
        assert html.escape(MARKUP_MESSAGE, quote=True) in source  # written, escaped
        parser = _Tags()
        parser.feed(source)
        assert set(parser.tags) <= ALLOWED_TAGS, set(parser.tags) - ALLOWED_TAGS
    browser.get(out.as_uri())
    for title, text, found in (
        (
            browser.title,
            _by_css(browser, "body").text,
            browser.find_elements("css selector", "#pwned, script, img"),
        ),
        (served_title, served_text, served_pwned),
    ):
        assert "PWNED" not in title and not found
        assert '<b id="pwned">owned</b>' in text  # shown to the reader as the text it is


def test_the_sidecar_page_shows_the_partial_pass_the_probe_and_its_history(
    tmp_path: Path, browser: Any
) -> None:
    key = "sk-statuspage-" + "7" * 24
    key_file = tmp_path / "key"
    key_file.write_text(key + "\n")
    with (
        # --enable-metrics: the server's own sglang:spec_accept_length, charted beside the probe
        sim_process(tmp_path, "--api-key-file", str(key_file), "--enable-metrics") as sim,
        daemon_process(
            tmp_path,
            sim.url,
            *FAST,
            "--log",
            str(sim.log),
            "--allow-partial",
            env={"SPARK_VALIDATE_API_KEY": key},
        ) as d,
    ):
        assert wait_for(lambda: d.get("/readyz").status_code == 200, timeout=40), d.log()[-3000:]
        # the probe runs every 2 s here: wait for a few points of history
        # and for the server's own gauge, which moves once the probe's traffic has been decoded
        assert wait_for(
            lambda: (lambda t: t.count("<circle") >= 3 and "<polyline" in t)(d.get("/").text), timeout=40
        ), d.log()[-2000:]
        report = d.get("/report").json()
        raw = d.get("/").text
        browser.get(f"{d.base}/")
        word = _by_css(browser, "#verdict-word").text
        partial = _by_css(browser, "#partial").text
        ready = _by_css(browser, "#ready").text
        probe = _by_css(browser, "#probe-accept").text
        points = len(_all_css(browser, "#acceptance svg circle"))
        server_line = _all_css(browser, "#acceptance svg polyline")
        figures = _by_css(browser, "#acceptance .fig").text
        refresh = _by_css(browser, 'meta[http-equiv="refresh"]').get_attribute("content")
        not_proven = _by_css(browser, "#not-proven").text
        browser.save_screenshot(str(tmp_path / "sidecar.png"))
    assert word == report["verdict"].upper() == "PASS"
    assert partial == f"partial: {len(report['coverage']['not_proven'])} unproven"
    assert ready == "ready"
    assert f"{report['probe']['accept_length']:.2f}" in probe and "[" in probe  # the value and its interval
    assert points >= 3 and int(refresh or 0) > 0
    assert server_line and "server's own reading" in figures  # the server's /metrics gauge, over time
    assert "spec.lm_head_shared" in not_proven and "--attestation" in not_proven
    assert key not in raw and key not in json.dumps(report)


def test_before_the_first_check_the_page_says_it_is_waiting(tmp_path: Path, browser: Any) -> None:
    from tests.support.loopback import free_port

    nothing = f"http://127.0.0.1:{free_port()}"
    with daemon_process(tmp_path, nothing, "--wait", "30", "--interval", "1") as d:
        page = d.get("/")
        browser.get(f"{d.base}/")
        word = _by_css(browser, "#verdict-word").text
    assert page.status_code == 200 and word == "WAITING"


def test_head_and_unknown_paths_still_answer_as_before(tmp_path: Path) -> None:
    with sim_process(tmp_path) as sim, daemon_process(tmp_path, sim.url, *FAST) as d:
        head = httpx.head(f"{d.base}/", timeout=5)
        missing = d.get("/nope")
    assert head.status_code == 200 and head.text == "" and int(head.headers["content-length"]) > 0
    assert missing.status_code == 404 and "/" in missing.json()["endpoints"]


def test_every_supplied_string_is_escaped_wherever_it_lands() -> None:
    """In-process, over every place the page writes report text: the target, the pack's name, a check's
    message, evidence keys and values, why, remedy, waiver, the coverage's reasons and inputs."""
    from validator.outputs.html import SidecarView, page
    from validator.report import CheckResult, Coverage, NotProven, Report, Severity, Status, Verdict, Waiver

    evil = '"><script>x()</script><b id="pwned">'
    checks = [
        CheckResult(
            id="spec.config",
            status=Status.FAIL,
            severity=Severity.CRITICAL,
            message=evil,
            evidence={evil: evil, "nested": {"k": evil}},
            sources=[evil],
            remedy=evil,
            why=evil,
        ),
        CheckResult(
            id="moe.backend",
            status=Status.WARN,
            severity=Severity.WARNING,
            message="m",
            waived=Waiver(check="moe.backend", justification=evil, expires=evil),
        ),
    ]
    report = Report(
        mode="check",
        verdict=Verdict.FAIL,
        rule_pack=evil,
        started_at=evil,
        duration_s=0.1,
        checks=checks,
        target=evil,
        coverage=Coverage(
            critical=1,
            proven=0,
            not_proven=["spec.config"],
            missing=[NotProven(id="spec.config", reason=evil, input=evil)],
        ),
    )
    for view in (None, SidecarView(ready=False, phase=evil, reason=evil)):
        text = page(report, view=view)
        assert "<script" not in text and 'id="pwned"' not in text
        assert text.count(html.escape(evil, quote=True)) >= 10
        parser = _Tags()
        parser.feed(text)
        assert set(parser.tags) <= ALLOWED_TAGS
