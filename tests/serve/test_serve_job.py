"""`python jobs/serve.py` as a user runs it: a real service (Ray Serve on a local loopback
cluster it starts) on a tiny indexed output, asked over HTTP with a token, pushed past its
queue (503s, never a hang), used through its search page in headless Chromium (WebDriver),
spoken to by the real `openai` client, and stopped with Ctrl-C, which takes down the service and
the Ray it started, exit status 0. Its table holds one 300,000-character row without a space:
the page shows it whole on a 400 px and a 1,280 px screen."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import ROOT, free_port
from served_output import ROWS, indexed_output, job_vectors

TOKEN = "test-token"
LONG_ROW = "longword" * 37_500  # 300,000 characters, not one space
SCREENSHOTS_ENV = "SENTRAY_PAGE_SCREENSHOTS"  # a folder: the page's screenshots kept there too
pytestmark = [pytest.mark.slow, pytest.mark.ray]


@dataclass
class Running:
    process: subprocess.Popen
    ready: dict  # the line it printed once it answered
    root: Path
    stderr: Path
    family: list[int]  # its process and every process under it (Ray's), once ready


def request(url: str, body: dict | None = None, token: str | None = TOKEN,
            timeout: float = 60) -> tuple[int, dict]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    data = None if body is None else json.dumps(body).encode()
    try:
        with urllib.request.urlopen(urllib.request.Request(url, data, headers),
                                    timeout=timeout) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as failure:
        text = failure.read().decode()
        try:
            return failure.code, json.loads(text)
        except ValueError:
            return failure.code, {"error": text}


@pytest.fixture(scope="module")
def running(tmp_path_factory, tiny_model_dir, brown_corpus):
    import psutil

    root = indexed_output(tmp_path_factory.mktemp("serve-job"), tiny_model_dir, brown_corpus,
                          extra=(LONG_ROW,))
    stderr = root / "stderr.txt"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("RAY_ADDRESS", None)
    with stderr.open("w") as errors:
        process = subprocess.Popen(
            [sys.executable, "jobs/serve.py", str(root / "out"), "--port", str(free_port()),
             "--direct-port", str(free_port()), "--token", TOKEN, "--max-batch-size", "2",
             "--max-queued-requests", "2"],
            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=errors, text=True)
    line = process.stdout.readline()  # the one line it prints once it answers
    if not line:
        process.wait(30)
        pytest.fail(f"the service did not start:\n{stderr.read_text()[-3000:]}")
    family = [process.pid] + [p.pid for p in psutil.Process(process.pid).children(True)]
    yield Running(process, json.loads(line), root, stderr, family)
    if process.poll() is None:  # a test failed before the last one stopped it
        process.send_signal(signal.SIGINT)
        process.wait(60)


def test_it_answers_searches_over_http_with_its_token(running):
    url = running.ready["url"]
    assert url.startswith("http://127.0.0.1:") and running.ready["rows"] == ROWS + 1
    assert running.ready["search"] == "exact, the vectors held in memory"
    line = (running.root / "brown.txt").read_text().splitlines()[42]
    status, found = request(f"{url}/search", {"query": line, "k": 5})
    assert status == 200 and len(found["hits"]) == 5
    assert found["hits"][0]["text"] == line and found["hits"][0]["id"] == "brown.txt:42"
    assert request(f"{url}/search", {"query": line}, token=None)[0] == 401
    status, bad = request(f"{url}/search", {"query": line, "k": 0})
    assert status == 400 and bad == {"error": "k must be a whole number from 1 to 100, got 0"}
    status, info = request(f"{url}/info")
    assert status == 200 and info["rows"] == ROWS + 1 and info["pooling"] == "last_avg"


def test_the_replica_answers_on_its_direct_port_too(running):
    """--direct-port: the one replica answers the same API itself, with no proxy between
    (loopback, the token needed): the same hits as through --port, by GET and by POST."""
    url, direct = running.ready["url"], running.ready["direct_url"]
    assert direct.startswith("http://127.0.0.1:") and direct != url
    line = (running.root / "brown.txt").read_text().splitlines()[7]
    status, proxied = request(f"{url}/search", {"query": line, "k": 4})
    query = urllib.parse.urlencode({"query": line, "k": 4})
    status_direct, straight = request(f"{direct}/search?{query}")
    assert status == status_direct == 200
    assert [h["id"] for h in straight["hits"]] == [h["id"] for h in proxied["hits"]]
    assert straight["hits"][0]["text"] == line
    assert request(f"{direct}/search", {"query": line, "k": 2})[0] == 200
    assert request(f"{direct}/search?{query}", token=None)[0] == 401


def test_an_overload_gets_503s_with_a_reason_never_a_hang(running):
    """2 queued beside 4 in flight (--max-batch-size 2): of 40 searches sent at once, those
    past the queue are refused at once with a 503; every one is answered."""
    url = running.ready["url"]
    started = time.perf_counter()
    with ThreadPoolExecutor(40) as pool:
        answers = list(pool.map(lambda i: request(f"{url}/search", {"query": f"text {i}"}),
                                range(40)))
    assert time.perf_counter() - started < 60
    statuses = [status for status, _ in answers]
    assert set(statuses) <= {200, 503} and statuses.count(503) > 0 and 200 in statuses
    reasons = {body["error"] for status, body in answers if status == 503}
    assert all("max_queued_requests" in reason or "overloaded" in reason
               for reason in reasons), reasons


def test_the_search_page_in_a_real_browser(running, tmp_path):
    """Headless Chromium opens the page, a query is typed and sent with Enter, and the page
    shows the hits with their text, score and id, what the index holds and the latency."""
    from sentray.testing.browser import headless_chromium, search_in_page

    line = (running.root / "brown.txt").read_text().splitlines()[7]
    browser = headless_chromium()
    try:
        hits, info, status = search_in_page(browser, f"{running.ready['url']}/?token={TOKEN}",
                                            line)
        browser.save_screenshot(str(tmp_path / "page.png"))
    finally:
        browser.quit()
    assert not Path(browser.profile).exists()  # the fresh profile went with the browser
    assert hits[0].text == line and hits[0].id == "brown.txt:7" and hits[0].score > 0.99
    scores = [hit.score for hit in hits]
    assert len(hits) == 10 and scores == sorted(scores, reverse=True)
    assert f"{ROWS + 1} rows" in info and "pooling mean (last_avg)" in info
    assert "10 hits in " in status and " ms" in status
    assert (tmp_path / "page.png").stat().st_size > 10_000


@pytest.mark.parametrize("width", [400, 1280])
def test_the_page_holds_a_300000_character_hit_on_any_screen(running, tmp_path, width):
    """Headless Chromium at `width` px: the hit of 300,000 characters (the API sends its first
    1,000, the page shows a few lines of them) leaves no horizontal scroll, the Search button
    whole and the page's height bounded; a screenshot of each."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    from sentray.testing.browser import headless_chromium

    browser = headless_chromium(width, 900)
    try:  # the window has a least width of its own (500 px): the viewport is set exactly
        browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
            "width": width, "height": 900, "deviceScaleFactor": 1, "mobile": False})
        browser.get(f"{running.ready['url']}/?token={TOKEN}")
        wait = WebDriverWait(browser, 60)
        wait.until(lambda b: "rows" in b.find_element(By.ID, "info").text)
        # its first 6,000 characters: truncated by the model as the row was, the same vector
        browser.execute_script("document.getElementById('query').value = arguments[0]",
                               LONG_ROW[:6000])
        browser.find_element(By.ID, "search").click()
        wait.until(lambda b: " ms " in b.find_element(By.ID, "status").text)
        first = browser.find_element(By.CSS_SELECTOR, "#results li.hit")
        assert first.find_element(By.CLASS_NAME, "text").text.startswith("longwordlongword")
        assert "of 300,000 characters" in first.find_element(By.CLASS_NAME, "meta").text
        assert "from brown.txt, row 120" in first.find_element(By.CLASS_NAME, "meta").text
        page = browser.execute_script(
            "const e = document.documentElement, b = document.getElementById('search')"
            ".getBoundingClientRect(); return {scroll: e.scrollWidth, client: e.clientWidth, "
            "height: e.scrollHeight, left: b.left, right: b.right, top: b.top, "
            "bottom: b.bottom, width: b.width};")
        browser.save_screenshot(str(tmp_path / f"page-{width}.png"))
        if os.environ.get(SCREENSHOTS_ENV):
            browser.save_screenshot(str(Path(os.environ[SCREENSHOTS_ENV])
                                        / f"search-page-{width}px.png"))
    finally:
        browser.quit()
    # the viewport less its vertical scroll bar, and nothing wider than it
    assert width - 20 <= page["client"] <= width and page["scroll"] <= page["client"], page
    assert 0 <= page["left"] and page["right"] <= page["client"] and page["width"] > 40, page
    assert page["top"] >= 0 and page["bottom"] < 900, page
    assert page["height"] < 8 * 900, page  # ten hits of a few lines each, never 69,000 px


def test_the_openai_client_against_the_real_service(running):
    """`client.embeddings.create` through Ray Serve's proxy, the token as its API key: the
    embedding job's own vectors (cosine >= 0.9999: the same encoder on the same runtime)."""
    import numpy as np
    import openai

    client = openai.OpenAI(base_url=f"{running.ready['url']}/v1", api_key=TOKEN,
                           max_retries=0, timeout=60)
    stored = job_vectors(running.root)
    ids = sorted(stored)[:3]
    model = client.models.list().data[0].id
    answer = client.embeddings.create(model=model, input=[stored[i][0] for i in ids])
    got = np.asarray([d.embedding for d in answer.data], dtype=np.float32)
    expected = np.stack([stored[i][1] for i in ids])
    cosine = (got * expected).sum(1) / (np.linalg.norm(got, axis=1)
                                        * np.linalg.norm(expected, axis=1))
    assert cosine.min() >= 0.9999 and answer.usage.total_tokens > 0
    with pytest.raises(openai.BadRequestError) as refused:
        client.embeddings.create(model=model, input=[])
    assert refused.value.body["param"] == "input"
    assert request(f"{running.ready['url']}/healthz", token=None) == (200, {"status": "ok"})


def test_ctrl_c_stops_the_service_and_the_ray_it_started(running):
    import psutil

    running.process.send_signal(signal.SIGINT)
    assert running.process.wait(90) == 0
    deadline = time.time() + 30
    while time.time() < deadline and any(psutil.pid_exists(p) for p in running.family):
        time.sleep(0.5)
    left = [p for p in running.family if psutil.pid_exists(p)
            and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]
    assert not left, [psutil.Process(p).cmdline()[:2] for p in left]
    assert running.process.stdout.read() == ""  # nothing on stdout but the ready line
    log = running.stderr.read_text()
    assert "POST /search 200 " in log and "POST /search 400 " in log
    assert "GET /info 401 " not in log and "POST /search 401 " in log
    assert "\x1b[" not in log  # no colour codes in a file


def test_a_port_in_use_is_named_before_ray_starts(running, tmp_path):
    import socket

    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        done = subprocess.run([sys.executable, "jobs/serve.py", str(running.root / "out"),
                               "--port", str(port)], cwd=ROOT, capture_output=True, text=True,
                              env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)
    assert done.returncode == 1 and done.stdout == ""
    assert f"error: cannot listen on 127.0.0.1:{port}" in done.stderr
    assert "--port" in done.stderr
