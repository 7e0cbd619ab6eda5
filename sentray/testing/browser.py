"""A real browser for the tests and the bench: Debian's headless Chromium driven through
WebDriver (selenium, with the system's chromedriver: no browser or driver is downloaded), and
the search page of `sentray serve` used as a person uses it: type a query, press Enter, read
the hits the page shows."""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass

CHROMIUM = ("chromium", "chromium-browser", "google-chrome")
# Headless, no sandbox (root in a container), and nothing that reaches out of this machine
FLAGS = ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--no-first-run", "--disable-extensions", "--disable-default-apps")


def headless_chromium(width: int = 1100, height: int = 800):
    """A WebDriver session of headless Chromium with a fresh profile (`session.profile`, a
    temporary folder removed by `session.quit()`); FileNotFoundError naming the packages when
    the browser or its driver is not installed."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    browser = next((found for name in CHROMIUM if (found := shutil.which(name))), None)
    driver = shutil.which("chromedriver")
    if browser is None or driver is None:
        raise FileNotFoundError("headless Chromium needs Debian's packages: apt-get install -y "
                                "chromium chromium-driver")
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    profile = tempfile.mkdtemp(prefix="chromium-")
    for flag in (*FLAGS, f"--user-data-dir={profile}", f"--window-size={width},{height}"):
        options.add_argument(flag)
    try:
        session = webdriver.Chrome(service=Service(executable_path=driver), options=options)
    except BaseException:
        shutil.rmtree(profile, ignore_errors=True)
        raise
    quit_browser = session.quit

    def quit_and_remove_profile() -> None:  # a profile is ~3 MB, left in /tmp by every session
        try:
            quit_browser()
        finally:
            shutil.rmtree(profile, ignore_errors=True)

    session.profile, session.quit = profile, quit_and_remove_profile
    return session


@dataclass(frozen=True)
class PageHit:
    text: str
    score: float
    id: str


def search_in_page(browser, url: str, query: str,
                   timeout_s: float = 60) -> tuple[list[PageHit], str, str]:
    """Open the search page at `url`, type `query`, press Enter; (the hits it shows, its
    description of the index, its status line with the latency)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(url)
    wait = WebDriverWait(browser, timeout_s)
    wait.until(lambda b: "rows" in b.find_element(By.ID, "info").text)
    box = browser.find_element(By.ID, "query")
    box.clear()
    box.send_keys(query, Keys.ENTER)
    wait.until(lambda b: " ms " in b.find_element(By.ID, "status").text
               or "error" in (b.find_element(By.ID, "status").get_attribute("class") or ""))
    hits = [PageHit(item.find_element(By.CLASS_NAME, "text").text,
                    float(item.find_element(By.CLASS_NAME, "score").text),
                    item.find_element(By.CLASS_NAME, "id").text)
            for item in browser.find_elements(By.CSS_SELECTOR, "#results li.hit")]
    return (hits, browser.find_element(By.ID, "info").text,
            browser.find_element(By.ID, "status").text)
