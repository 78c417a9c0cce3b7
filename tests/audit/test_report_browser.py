"""report.html as a person sees it: the audit of a hand-built log rendered in headless Chromium (selenium with the
system's chromium and chromedriver), asserting on what is visible — the export's manifest first, the fenced-leader
warning, the timeline and its filter, a consequence folded under its root cause until its summary is clicked,
resource types by name, no cell reading "None".

Chromium comes from Debian (``make browser``). Without it the test skips locally, and fails under CI (``CI=true``).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from audit_helpers import TS, LogBuilder, partition, pchange, register, topic_config, uid

from audit.job import run_audit
from controller.records import ConfigRecord, FenceBrokerRecord, TopicRecord, UnfenceBrokerRecord

FENCED_LEADS = 2500  # partitions led by broker 103 when it is fenced
MANIFEST = {
    "cluster_id": "q1Sh-9_ITrWk7Yb3XaVNoA",
    "node_id": 1,
    "high_watermark": None,
    "log_end_offset": 0,  # set by the test
    "epoch": 1,
    "exported_at": "2026-11-23T20:00:00Z",
    "source": "offline export of /data/node-1 (the high watermark is not stored on disk: every valid batch copied)",
    "files": {"__cluster_metadata-0/00000000000000000000.log": {"bytes": 1, "sha256": "0"}},
}


def browser_paths() -> tuple[str, str] | None:
    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    return (binary, driver) if binary and driver else None


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    paths = browser_paths()
    if paths is None:
        if os.environ.get("CI"):
            pytest.fail("chromium and chromedriver are needed under CI: `make browser` installs them")
        pytest.skip("no chromium/chromedriver on PATH (`make browser` installs them)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = paths[0]
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--window-size=1400,900"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(paths[1]), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def report_log(root: Path) -> LogBuilder:
    """Three brokers; 'orders' with FENCED_LEADS partitions led by 103, which is then fenced with no leader moved;
    'moves' whose partition 0 changes leader and ISR; 'bad', whose record leaves its leader outside the ISR (a
    root cause: the final state shows it again); configs of a topic and of a broker."""
    log = LogBuilder()
    log.add(*(register(b, 1, rack=f"r{b % 2}") for b in (101, 102, 103)), timestamp=TS)
    log.add(*(UnfenceBrokerRecord(id=b, epoch=1) for b in (101, 102, 103)), timestamp=TS + 1000)
    log.add(TopicRecord(name="orders", topic_id=uid(1)), timestamp=TS + 2000)
    for start in range(0, FENCED_LEADS, 500):
        log.add(*(partition(uid(1), i, [103, 101, 102]) for i in range(start, start + 500)), timestamp=TS + 2000)
    log.add(TopicRecord(name="moves", topic_id=uid(2)), partition(uid(2), 0, [101, 102]), timestamp=TS + 3000)
    log.add(pchange(uid(2), 0, leader=102, isr=[102]), timestamp=TS + 4000)
    log.add(TopicRecord(name="bad", topic_id=uid(3)), partition(uid(3), 0, [101, 102], [101], 102), timestamp=TS + 5000)
    log.add(topic_config("orders", "retention.ms", "86400000"), timestamp=TS + 6000)
    log.add(ConfigRecord(resource_type=4, resource_name="101", name="log.cleaner.threads", value="2"))
    log.add(FenceBrokerRecord(id=103, epoch=1), timestamp=TS + 7000)
    log.add(pchange(uid(2), 0, leader=-1, isr=[102]), timestamp=TS + 8000)
    log.write(root)
    return log


@pytest.fixture(scope="module")
def audited(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str], Any]:
    root = tmp_path_factory.mktemp("report")
    log = report_log(root / "log")
    lines: list[str] = []
    manifest = {**MANIFEST, "log_end_offset": log.next_offset}
    result = run_audit(spark, root / "log", root / "out", manifest=manifest, progress=lines.append)
    return root / "out", lines, result


def test_progress_summary_and_warnings(audited: tuple[Path, list[str], Any]) -> None:
    out, lines, result = audited
    assert lines[0].startswith("decoding 1 file(s) (") and any(line.startswith("writing report") for line in lines)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["manifest"]["cluster_id"] == MANIFEST["cluster_id"] and "files" not in summary["manifest"]
    fenced = summary["warnings"]["leaders_on_fenced_brokers"]
    assert fenced["count"] == FENCED_LEADS and fenced["by_broker"] == {"103": FENCED_LEADS}
    assert summary["warnings"]["offline_partitions"]["count"] == 1
    assert f"warning: {FENCED_LEADS:,} partition(s) led by a fenced broker (broker 103: {FENCED_LEADS:,})" in (
        result.text()
    )


def visible_rows(driver: Any, table: str) -> list[str]:
    from selenium.webdriver.common.by import By

    return [r.text for r in driver.find_elements(By.CSS_SELECTOR, f"#{table} tbody tr") if r.is_displayed()]


def test_the_report_as_a_person_sees_it(audited: tuple[Path, list[str], Any], browser: Any) -> None:
    from selenium.webdriver.common.by import By

    out, _, _ = audited
    browser.get((out / "report.html").resolve().as_uri())
    body = browser.find_element(By.TAG_NAME, "body").text

    # the manifest first
    manifest = browser.find_element(By.ID, "manifest")
    assert manifest.location["y"] < browser.find_element(By.ID, "warnings").location["y"]
    assert MANIFEST["cluster_id"] in manifest.text and "not recorded (offline export)" in manifest.text
    assert "2026-11-23T20:00:00Z" in manifest.text and "offline export of /data/node-1" in manifest.text

    # the fenced-leader and offline warnings
    warning = browser.find_element(By.ID, "warning-leaders_on_fenced_brokers")
    assert warning.is_displayed()
    assert f"{FENCED_LEADS:,} partition(s) led by a fenced broker (broker 103: {FENCED_LEADS:,})" in warning.text
    assert "1 partition(s) without a leader" in browser.find_element(By.ID, "warning-offline_partitions").text

    # the timeline, and its filter hiding rows
    rows = visible_rows(browser, "timeline")
    assert any("moves-0" in r and "leader 101 -> 102" in r for r in rows), rows
    assert any("moves-0" in r and "isr 101,102 -> 102" in r for r in rows), rows
    assert any("broker 103" in r and "broker_fenced" in r for r in rows), rows
    assert any("TOPIC orders" in r and "retention.ms = 86400000" in r for r in rows), rows
    text = browser.find_element(By.ID, "timeline-text")
    text.send_keys("moves-0")
    filtered = visible_rows(browser, "timeline")
    assert 0 < len(filtered) < len(rows) and all("moves-0" in r for r in filtered), filtered
    browser.find_element(By.CSS_SELECTOR, "input.timeline-kind[value=leader]").click()
    unchecked = visible_rows(browser, "timeline")
    assert 0 < len(unchecked) < len(filtered) and all("leader" not in r.split() for r in unchecked), unchecked
    text.clear()
    browser.find_element(By.CSS_SELECTOR, "input.timeline-kind[value=leader]").click()
    assert len(visible_rows(browser, "timeline")) == len(rows)

    # a root cause first, its consequence folded until the summary is clicked
    root = browser.find_element(By.CSS_SELECTOR, "#findings tr.root")
    assert "leader_in_isr" in root.text and "partition 0 of topic id" in root.text
    folded = browser.find_element(By.CSS_SELECTOR, "#findings tr.consequences details table tr:nth-child(2)")
    assert not folded.is_displayed() and "final state: partition bad-0" not in body
    browser.find_element(By.CSS_SELECTOR, "#findings tr.consequences summary").click()
    assert folded.is_displayed() and "final state: partition bad-0 has leader 102 outside ISR" in folded.text

    # enums by name, blanks for nulls
    types = [
        r.find_element(By.TAG_NAME, "td").text for r in browser.find_elements(By.CSS_SELECTOR, "#configs_in_use tr")[1:]
    ]
    assert sorted(types) == ["BROKER", "TOPIC"], types
    nones = browser.execute_script(
        "return Array.from(document.querySelectorAll('td')).filter(td => td.textContent.trim() === 'None').length"
    )
    assert nones == 0
    topics = browser.find_element(By.ID, "topics").text
    assert "orders" in topics and str(FENCED_LEADS) in topics
