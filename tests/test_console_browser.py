"""The web console in a real browser: Debian's Chromium, headless, driven by Playwright, against the real
service over real HTTP (API keys on, the demo catalogue and memories loaded).

The page must show what the service answered: each check compares the page with the JSON answer the
browser received (or with a fresh call to the API), and with what the demo data make the right answer
(a follow-up with 「あれ」 stays with its agent, 「ところで」 switches). Screenshots go to
``test-artifacts/`` (gitignored). Without /usr/bin/chromium or Playwright these tests fail, never skip:
``make test`` installs both.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from memroute.cli.demo import demo_items
from memroute.embed import CachedEmbedder
from tests.service_server import KEYS, Live, auth, live_service, settings_for

try:
    from playwright.sync_api import Browser, Page, Response, expect, sync_playwright
except ImportError as exc:  # a collection error fails the run: the browser test is never skipped quietly
    raise ImportError("Playwright for Python is missing: pip install -e '.[dev]' (make test installs it)") from exc

pytestmark = pytest.mark.slow

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run"]
ARTIFACTS = Path(__file__).resolve().parents[1] / "test-artifacts"
SESSION = "console-ja"
NOW = "2026-11-20T09:00:00+09:00"
CONVERSATION = (
    # (user turn, agent, action, first recalled memory): a request, a follow-up that only makes sense
    # with the turn before it (あれ → ログイン), and an explicit switch to another agent.
    ("ログインのバグを直して", "coder", "routed", "demo-07"),
    ("あれどうなった？", "coder", "stayed", "demo-07"),
    ("ところで、来週の予定は？", "calendar", "switched", "demo-06"),
)
MARKUP = "<img src=x onerror=alert(1)> 太字の<b>メモ</b>"


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: apt-get install -y chromium (make test installs it); "
                    "the console's browser test never downloads a browser of its own")
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
        yield chromium
        chromium.close()


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory, embedder: CachedEmbedder) -> Iterator[Live]:
    with live_service(settings_for(tmp_path_factory.mktemp("console")), embedder) as running:
        r = httpx.post(f"{running.url}/v1/memories/import", headers=auth("alice"), timeout=60,
                       json={"items": [{k: v for k, v in i.items() if k != "owner"} for i in demo_items()]})
        assert r.status_code == 200, r.text
        yield running


@pytest.fixture
def api(live: Live) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=live.url, headers=auth("alice"), timeout=60) as client:
        yield client


@pytest.fixture
def page(browser: Browser, live: Live) -> Iterator[Page]:
    """A fresh tab in Japanese; any script error or CSP violation on the page fails the test."""
    context = browser.new_context(locale="ja-JP", viewport={"width": 1440, "height": 1000})
    tab = context.new_page()
    problems: list[str] = []
    tab.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))
    tab.on("console", lambda msg: problems.append(f"console {msg.type}: {msg.text}") if msg.type == "error" else None)
    yield tab
    context.close()
    # A refused key answers 401, which the browser logs as a failed resource: expected, not a fault.
    assert [p for p in problems if "401" not in p] == []


def sign_in(page: Page, live: Live, key: str = KEYS["alice"]) -> None:
    page.goto(f"{live.url}/console/")
    expect(page.locator("#key-form")).to_be_visible()
    page.fill("#api-key", key)
    page.press("#api-key", "Enter")


def shot(page: Page, name: str) -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / name
    page.screenshot(path=str(path), full_page=True)
    return path


def send_turn(page: Page, text: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """Type a user turn and press Enter; the recall and route answers the page received."""
    page.fill("#turn-text", text)
    with page.expect_response(lambda r: r.url.split("?")[0].endswith("/v1/recall")) as recall_info, \
            page.expect_response(lambda r: r.url.split("?")[0].endswith("/v1/route")) as route_info:
        page.press("#turn-text", "Enter")
    recall, route = _ok(recall_info.value), _ok(route_info.value)
    return recall, route


def _ok(response: Response) -> dict[str, Any]:
    assert response.status == 200, response.text()
    body: dict[str, Any] = response.json()
    return body


def test_a_wrong_key_is_refused_and_the_key_form_stays(page: Page, live: Live) -> None:
    sign_in(page, live, key="mr_not-a-key")
    expect(page.locator("#banner")).to_contain_text("refused")
    expect(page.locator("#key-form")).to_be_visible()
    expect(page.locator("#owner-box")).to_be_hidden()


def test_playground_three_japanese_turns(page: Page, live: Live, api: httpx.Client) -> None:
    sign_in(page, live)
    expect(page.locator("#owner")).to_have_text("alice")
    page.fill("#session", SESSION)
    page.press("#session", "Tab")  # "change" loads the session's (empty) log
    page.fill("#now", NOW)

    for n, (text, agent, action, first_memory) in enumerate(CONVERSATION, start=1):
        recall, route = send_turn(page, text)
        view = page.locator(f'article[data-turn="{n}"]')
        expect(view).to_be_visible()
        expect(view.locator(".turn-title q")).to_have_text(text)

        # The service's decision, and the page showing exactly that decision.
        assert (route["agent"], route["action"]) == (agent, action), route["reason"]
        routing = view.locator('[data-part="routing"]')
        expect(routing.locator('[data-field="agent"]')).to_have_attribute("data-agent-id", agent)
        expect(routing.locator('[data-field="action"]')).to_have_text(action)
        expect(routing.locator('[data-field="reason"]')).to_have_text(route["reason"])
        rows = routing.locator("tbody tr")
        assert rows.evaluate_all("rs => rs.map(r => r.dataset.agentId)") == [c["agent_id"] for c in route["candidates"]]
        assert len(route["candidates"]) == 3  # every agent of the demo catalogue, with its score
        for i, candidate in enumerate(route["candidates"]):
            expect(rows.nth(i).locator(".score-num")).to_have_text(f"{candidate['score']:.4f}")
            for strategy in candidate["strategies"]:
                expect(rows.nth(i).locator(f'[data-strategy="{strategy}"]')).to_have_count(1)

        # The recalled memories, best first, with their scores, relevance and reasons.
        assert recall["memories"][0]["id"] == first_memory
        assert recall["memories"][0]["relevance"] in ("high", "medium")
        items = view.locator('[data-part="recalled"] li.memory')
        assert items.evaluate_all("ls => ls.map(l => l.dataset.memoryId)") == [m["id"] for m in recall["memories"]]
        for i, memory in enumerate(recall["memories"]):
            expect(items.nth(i).locator('[data-field="text"]')).to_have_text(memory["text"])
            expect(items.nth(i).locator('[data-field="relevance"]')).to_have_text(memory["relevance"])
            expect(items.nth(i).locator(".score-num")).to_have_text(f"{memory['score']:.4f}")
            expect(items.nth(i).locator('[data-field="reason"]')).to_have_text(memory["reason"])
        expect(items.first.locator('[data-field="text"]')).to_have_attribute("lang", "ja")
        # the numbers say what they mean where they appear (tooltips)
        explained = routing.locator("dt.explained", has_text="confidence")
        expect(explained).to_have_attribute("title", re.compile("How sure"))
        expect(routing.locator("th .explained", has_text="threshold")).to_have_attribute("title", re.compile("lowest"))
        expect(items.first.locator('[data-field="relevance"]')).to_have_attribute("title", re.compile("matters"))
        if action != "routed":
            expect(routing.locator("dt.explained", has_text="gap / margin")).to_have_attribute(
                "title", re.compile("switches when the gap is above the margin"))

        # The trace and the memory pack.
        trace = view.locator('[data-part="trace"]')
        expect(trace.locator('[data-field="strategy"]')).to_have_text(recall["trace"]["strategy"])
        shown_queries = trace.locator('[data-part="queries"] tbody tr').evaluate_all(
            "rs => rs.map(r => [r.cells[0].textContent, r.cells[1].textContent])")
        assert shown_queries == [[q["text"], q["source"]] for q in recall["trace"]["queries"]]
        expect(trace.locator("svg.chart rect.bar")).to_have_count(
            len([k for k in recall["trace"]["stages_ms"] if k != "total"]))
        if recall["memory_pack"]:
            assert view.locator('[data-field="pack"]').text_content() == recall["memory_pack"]

        if n == 2:  # あれ was resolved from turn 1, and searched for
            assert ["ログイン", "reference"] in shown_queries
            expect(trace).to_contain_text("あれ")

    # The page logged every user turn in the session (routing with a session appends the message).
    logged = api.get(f"/v1/sessions/{SESSION}/messages").json()
    assert [m["text"] for m in logged if m["role"] == "user"] == [t for t, *_ in CONVERSATION]
    expect(page.locator("#transcript li.role-user")).to_have_count(3)
    page.locator('article[data-turn="3"]').scroll_into_view_if_needed()
    shot(page, "console-playground-ja.png")

    # Earlier turns stay reachable from the transcript, with the keyboard.
    page.locator("#transcript button").first.focus()
    page.keyboard.press("Enter")
    expect(page.locator('article[data-turn="1"]')).to_be_visible()


def test_memories_browse_search_and_forget(page: Page, live: Live, api: httpx.Client) -> None:
    r = api.post("/v1/memories", params={"replace": "true"}, json={"id": "markup-1", "text": MARKUP})
    assert r.status_code == 201, r.text
    sign_in(page, live)
    page.click('nav a[data-page="memories"]')
    table = page.locator("#memories-table")
    expect(table.locator('tr[data-memory-id="markup-1"]')).to_be_visible()
    listed = [m["id"] for m in api.get("/v1/memories", params={"limit": 20}).json()]
    assert table.locator("tbody tr").evaluate_all("rs => rs.map(r => r.dataset.memoryId)") == listed
    # Data is text, never markup; and each text carries its language for CJK fonts and line breaking.
    expect(table.locator('tr[data-memory-id="markup-1"] [data-field="text"]')).to_have_text(MARKUP)
    assert table.locator("img, b").count() == 0
    expect(table.locator('tr[data-memory-id="demo-05"] [data-field="text"]')).to_have_attribute("lang", "ja")
    expect(table.locator('tr[data-memory-id="demo-08"] [data-field="text"]')).to_have_attribute("lang", "ko")
    shot(page, "console-memories-list.png")

    page.fill("#search-q", "打ち合わせ")
    page.select_option("#search-mode", "bm25")
    page.press("#search-q", "Enter")
    expect(table.locator("caption")).to_contain_text("打ち合わせ")
    found = [h["memory"]["id"] for h in api.get("/v1/search", params={"q": "打ち合わせ", "mode": "bm25",
                                                                       "limit": 20}).json()]
    assert found and found[0] == "demo-06"
    assert table.locator("tbody tr").evaluate_all("rs => rs.map(r => r.dataset.memoryId)") == found
    shot(page, "console-memories-ja.png")

    page.click("#search-clear")
    page.click('tr[data-memory-id="markup-1"] button:has-text("Forget")')
    expect(page.locator("#forget-dialog")).to_be_visible()
    page.click("#forget-confirm")
    expect(table.locator('tr[data-memory-id="markup-1"]')).to_have_count(0)
    assert api.get("/v1/memories/markup-1").status_code == 404


def test_metrics_charts_show_the_service_metrics(page: Page, live: Live, api: httpx.Client) -> None:
    assert api.post("/v1/recall", json={"text": "来週の予定は？", "now": NOW}).status_code == 200
    sign_in(page, live)
    expect(page.locator("#owner")).to_have_text("alice")
    page.click('nav a[data-page="metrics"]')
    section = page.locator('[data-metric="retrieval_latency_ms"]')
    expect(section.locator("figure").first).to_be_visible()

    counts = _recall_counts(api.get("/metrics").text)
    assert counts  # the recall above was counted
    shown = section.locator("figure").evaluate_all("fs => fs.map(f => f.dataset.series)")
    assert sorted(shown) == sorted(counts)
    for strategy, count in counts.items():
        expect(section.locator(f'figure[data-series="{strategy}"] figcaption')).to_contain_text(
            f"{count} observations")
    usage = page.locator('[data-metric="retrieval_strategy_usage_total"] svg.chart')
    expect(usage.locator("rect.bar")).to_have_count(len(counts))
    expect(page.locator('[data-metric="routing_latency_ms"] svg.chart').first).to_be_visible()
    shot(page, "console-metrics.png")


def _recall_counts(text: str) -> dict[str, int]:
    """``retrieval_latency_ms_count`` per strategy, read from the Prometheus text with no help from the page.

    The page fetched /metrics a moment before this, and nothing recalls in between: the counts agree."""
    counts: dict[str, int] = {}
    for match in re.finditer(r'^retrieval_latency_ms_count\{strategy="([^"]+)"\} (\S+)$', text, re.MULTILINE):
        if float(match[2]) > 0:
            counts[match[1]] = int(float(match[2]))
    return counts


def test_without_keys_the_owner_is_chosen_on_the_page(browser: Browser, tmp_path: Path,
                                                       embedder: CachedEmbedder) -> None:
    """Development mode (no keys, loopback, what ``make run`` serves): no key is asked for, and the owner
    field decides whose memories the page shows."""
    settings = settings_for(tmp_path, api_keys="", owner="demo")
    with live_service(settings, embedder) as running:
        running.memory.remember("ボブの買い物メモ: 牛乳と卵", owner="bob", id="bob-1")
        running.memory.remember("데모 메모: 내일 회의", owner="demo", id="demo-ko")
        context = browser.new_context(locale="ko-KR")
        try:
            page = context.new_page()
            page.goto(f"{running.url}/console/#memories")
            owner = page.locator("input#owner")
            expect(owner).to_have_value("demo")
            expect(page.locator("#key-form")).to_be_hidden()
            table = page.locator("#memories-table")
            expect(table.locator("tbody tr")).to_have_count(1)
            expect(table.locator('tr[data-memory-id="demo-ko"] [data-field="text"]')).to_have_attribute("lang", "ko")
            owner.fill("bob")
            owner.press("Enter")  # "change": the page reloads for the new owner
            expect(table.locator('tr[data-memory-id="bob-1"]')).to_be_visible()
            expect(table.locator("tbody tr")).to_have_count(1)
        finally:
            context.close()


def test_api_docs_render_offline(page: Page, live: Live) -> None:
    """/docs is Swagger UI from files the service serves: with every request to another host refused, the
    page still lists the API's operations, and the CSP reports nothing (the page fixture fails on errors)."""
    local = live.url.split("//", 1)[1]
    outside: list[str] = []

    def only_local(route: Any) -> None:
        url = route.request.url
        if url.startswith(("data:", "blob:")) or url.split("//", 1)[-1].startswith(local):
            route.continue_()
        else:
            outside.append(url)
            route.abort()

    page.route("**/*", only_local)
    response = page.goto(f"{live.url}/docs")
    assert response is not None and response.ok
    assert "default-src 'none'" in (response.headers.get("content-security-policy") or "")
    expect(page.locator(".swagger-ui .info .title")).to_contain_text("memroute", timeout=20_000)
    expect(page.locator(".opblock-summary-path", has_text="/v1/recall")).to_be_visible()
    page.locator(".opblock-summary-path", has_text="/v1/recall").first.click()
    expect(page.locator(".opblock-body").first).to_be_visible()
    shot(page, "docs-offline.png")
    assert outside == []
