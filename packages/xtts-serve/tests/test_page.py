"""The page at `/` in a real headless Chromium, on a real server (uvicorn in a thread):
it loads and lists the voices, a request plays its audio (the page counts the samples it
received: exactly the stream's), an uploaded clip appears in the voice list, and with an
API key the page's requests carry it. Skipped where no Chromium and chromedriver are
installed (`apt-get install chromium chromium-driver`) or selenium is missing."""

from __future__ import annotations

import shutil
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from xtts_serve import ServerConfig, create_app

webdriver = pytest.importorskip("selenium.webdriver")
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import Select, WebDriverWait  # noqa: E402

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")
# The slow tier (`hatch run test-slow`, run by CI): a real browser against a real server.
pytestmark = [pytest.mark.slow, pytest.mark.skipif(not (CHROMIUM and DRIVER),
                                                   reason="no chromium and chromedriver on PATH")]  # fmt: skip
KEY = "page-test-key"
TEXT = "Fine day."


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def server(engine) -> Iterator[str]:
    """The app on the session's engine, with an API key, served by uvicorn on localhost."""
    import uvicorn

    port = _free_port()
    app = create_app(engine, ServerConfig(api_key=KEY))
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(30)


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                 "--autoplay-policy=no-user-gesture-required", "--mute-audio"):  # fmt: skip
        options.add_argument(flag)
    driver = webdriver.Chrome(service=webdriver.ChromeService(executable_path=DRIVER),
                              options=options)  # fmt: skip
    yield driver
    driver.quit()


def _status(browser) -> str:
    return browser.find_element(By.ID, "status").text


def _wait(browser, until, seconds: float = 60) -> None:
    WebDriverWait(browser, seconds).until(lambda _: until())


def test_the_page_plays_a_stream_and_lists_an_upload(server, browser, engine, tone_clip,
                                                     tmp_path):  # fmt: skip
    browser.get(server)
    assert browser.title == "xtts-serve"
    _wait(browser, lambda: "ready" in browser.find_element(By.ID, "server").text)
    # Without the key the page's API requests are refused, and it says why.
    _wait(browser, lambda: "Authorization: Bearer" in _status(browser))
    key = browser.find_element(By.ID, "key")
    key.send_keys(KEY)
    browser.execute_script("arguments[0].dispatchEvent(new Event('change'))", key)
    voices = Select(browser.find_element(By.ID, "voice"))
    _wait(browser, lambda: len(voices.options) > 0)
    assert [o.get_attribute("value") for o in voices.options] == ["run"]

    text = browser.find_element(By.ID, "text")
    text.clear()
    text.send_keys(TEXT)
    browser.find_element(By.ID, "speak").click()
    _wait(browser, lambda: _status(browser).startswith("done"))
    expected = sum(len(chunk) for chunk in engine.stream(TEXT))
    assert int(browser.find_element(By.ID, "samples").text) == expected
    assert browser.find_element(By.ID, "first").text.endswith(" ms")
    assert "×" in browser.find_element(By.ID, "rtf").text

    clip = tmp_path / "me.wav"
    clip.write_bytes(tone_clip(1.5))
    browser.find_element(By.ID, "clip").send_keys(str(clip))
    browser.find_element(By.ID, "name").send_keys("me")
    browser.find_element(By.ID, "upload").click()
    _wait(browser, lambda: _status(browser) == "voice me added")
    names = [o.text for o in voices.options]
    assert names == ["run (run)", "me (upload)"]
    assert voices.first_selected_option.text == "me (upload)"


def test_the_page_needs_no_key_but_the_api_does(server):
    import httpx2

    assert httpx2.get(server + "/").status_code == 200
    assert httpx2.get(server + "/v1/audio/voices").status_code == 401
