"""The console in a real browser: Debian's chromium, headless, driven through its
chromedriver by Selenium, over the store of console_helpers. A person's path: search by
key, open the message (body, consume track), open the group's lag page.

ROCKETSTORE_CONSOLE_SCREENSHOTS=DIR also saves the main pages there as PNGs (how
docs/console/*.png are made)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.cli_helpers import body_of, uniq_of
from tests.console.console_helpers import DLQ, GROUP

webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed")
from selenium.common.exceptions import StaleElementReferenceException  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import Select, WebDriverWait  # noqa: E402

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None or CHROMEDRIVER is None,
    reason="chromium and chromedriver are needed (scripts/system-deps.sh installs them)",
)


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        options.add_argument(argument)
    options.add_argument("--window-size=1280,1000")
    # The system's driver: Selenium Manager would try to download one.
    driver = webdriver.Chrome(options=options, service=webdriver.ChromeService(CHROMEDRIVER))
    driver.set_page_load_timeout(120)
    # A click that navigates returns before the next page is there: finding its
    # elements waits for them (a loaded machine takes seconds).
    driver.implicitly_wait(60)
    try:
        yield driver
    finally:
        driver.quit()


def _shot(driver, name: str) -> None:
    directory = os.environ.get("ROCKETSTORE_CONSOLE_SCREENSHOTS")
    if directory:
        Path(directory).mkdir(parents=True, exist_ok=True)
        height = driver.execute_script("return document.body.scrollHeight")
        driver.set_window_size(1280, max(min(height + 20, 1400), 600))
        driver.save_screenshot(str(Path(directory) / f"{name}.png"))
        driver.set_window_size(1280, 1000)


def test_search_by_key_then_the_message_and_its_consume_track(browser, console_url):
    driver = browser
    driver.get(console_url + "/search")
    Select(driver.find_element(By.ID, "by")).select_by_value("key")
    driver.find_element(By.ID, "topic").send_keys("OrderEvents")
    driver.find_element(By.ID, "key").send_keys("order-5")
    driver.find_element(By.ID, "go").click()
    assert driver.find_element(By.ID, "found").text == "1 message(s)"
    _shot(driver, "search")
    driver.find_element(By.LINK_TEXT, uniq_of(5)).click()
    assert driver.find_element(By.ID, "body").text == body_of(5).decode()
    track = driver.find_elements(By.CSS_SELECTOR, "#tracks tr")[1]
    cells = [cell.text for cell in track.find_elements(By.TAG_NAME, "td")]
    assert cells[:2] == [GROUP, "CONSUMED"]
    _shot(driver, "message")
    driver.find_element(By.LINK_TEXT, "json").click()
    # (the text view's #body is there until the JSON view replaces the page)
    expected = '{\n  "order": 5\n}'
    WebDriverWait(driver, 60, ignored_exceptions=[StaleElementReferenceException]).until(
        lambda d: d.find_element(By.ID, "body").text == expected
    )


def test_the_lag_page_shows_the_groups_numbers(browser, console_url, console_store):
    _root, ends = console_store
    driver = browser
    driver.get(console_url + "/groups")
    _shot(driver, "groups")
    driver.find_element(By.LINK_TEXT, GROUP).click()
    total = ends[0] - 10 + ends[2] + ends[3]
    assert driver.find_element(By.ID, "total-lag").text == f"{total:,}"
    lags = {}
    for row in driver.find_elements(By.CSS_SELECTOR, "#lag tr")[1:]:
        cells = [cell.text for cell in row.find_elements(By.TAG_NAME, "td")]
        lags[int(cells[1])] = int(cells[4])
    assert lags == {0: ends[0] - 10, 1: 0, 2: ends[2], 3: ends[3]}
    _shot(driver, "group-lag")


def test_the_other_pages_open_in_the_browser(browser, console_url):
    driver = browser
    for path, name, heading in (
        ("/", "overview", "DefaultCluster / localStore"),
        ("/topics", "topics", "Topics"),
        ("/topic?name=OrderEvents", "topic", "Topic OrderEvents"),
        ("/dlq?topic=" + DLQ.replace("%", "%25"), "dlq", "Dead-letter queues"),
        ("/charts", "charts", "Rates"),
        ("/health?check=1", "health", "Store health"),
    ):
        driver.get(console_url + path)
        assert driver.find_element(By.TAG_NAME, "h1").text == heading
        _shot(driver, name)
    driver.get(console_url + "/health")
    assert driver.find_element(By.ID, "verdict").text == "OK"
