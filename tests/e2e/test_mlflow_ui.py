"""The MLflow UI, read in a real browser: a finished rl_round and a sweep, as a user sees them.

Runs the console script twice (an rl_round with overrides, a two-value skill sweep), starts
`mlflow ui` on 127.0.0.1 over the store they wrote, and drives Debian's headless chromium
through its chromedriver (selenium). It checks that

- the bare experiment URL, in a fresh browser, opens on its runs table (not the GenAI
  traces page) under the UI the run's summary says to start (`mlflow ui ... --app-name
  wai-exp`), and shows the run named by its preset and overrides;
- the run page's description states pass@1 with its 95% interval and the gate verdict;
- the sweep parent's page shows the per-value table;
- (issue 23 §6) the runs table opens with the headline metric columns (pass@1 and its
  interval, rows kept) in a browser that never chose columns; each sweep child's visible
  name says which value it ran; the run page lists the headline metrics first; the sweep
  parent has its per-value metrics; a run that publishes shows its training dataset first.

Screenshots of each page are saved under ``test-artifacts/mlflow-ui/`` (git-ignored) for a
person to look at. `.ci/run` installs chromium and chromium-driver
(scripts/start-test-services.sh); outside CI the test skips, saying so, without them.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from wai_exp.tracking.mlflow_tracker import UI_VIEW

# Its module fixture is costly: xdist keeps the module on one worker, so it is built once.
pytestmark = pytest.mark.xdist_group("mlflow_ui")

WAI_EXP = str(Path(sys.executable).parent / "wai-exp")
# ``python -m mlflow``: a venv made with --system-site-packages has no `mlflow` script.
MLFLOW = [sys.executable, "-m", "mlflow"]
SHOTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "mlflow-ui"
CHROME_FLAGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1600,1300",
]


def _browser_paths() -> tuple[str, str]:
    chromium = os.environ.get("WAI_EXP_TEST_CHROMIUM") or shutil.which("chromium")
    driver = os.environ.get("WAI_EXP_TEST_CHROMEDRIVER") or shutil.which("chromedriver")
    if not (chromium and driver):
        if os.environ.get("CI"):
            pytest.fail("CI=true but chromium/chromedriver are missing: .ci/run installs them")
        pytest.skip(
            "no chromium + chromedriver: `apt-get install chromium chromium-driver` "
            "(scripts/start-test-services.sh does, as .ci/run)"
        )
    return chromium, driver


def _wai(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        [WAI_EXP, *args], cwd=cwd, capture_output=True, text=True, timeout=900,
        env={k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-4000:]
    return proc


def _stop(server: subprocess.Popen) -> None:
    """End the server and every process it started (it runs in its own session)."""
    import signal

    with contextlib.suppress(ProcessLookupError):
        os.killpg(server.pid, signal.SIGTERM)
    try:
        server.wait(timeout=15)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server.pid, signal.SIGKILL)
        server.wait(timeout=15)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """An rl_round and a sweep in one store, and `mlflow ui` serving it."""
    chromium, driver = _browser_paths()
    cwd = tmp_path_factory.mktemp("ui")
    rl_out = _wai(cwd, "+experiment=rl_round", "simulate.budget=200", "seed=1").stdout
    sweep = _wai(cwd, "-m", "+experiment=eval", "simulate.budget=40", "agent.skill=0.6,0.9")
    from mlflow import MlflowClient

    uri = f"sqlite:///{cwd.resolve() / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri)
    rl = client.get_experiment_by_name("rl_round")
    ev = client.get_experiment_by_name("eval")
    [run] = client.search_runs([rl.experiment_id])
    [parent] = client.search_runs([ev.experiment_id], filter_string="tags.`wai.sweep` = 'parent'")
    assert f"MLflow parent run: {parent.info.run_id}" in sweep.stdout
    port = _free_port()
    log = (cwd / "mlflow-ui.log").open("w")
    # The UI as the run's summary says to start it (`open it:  mlflow ui ...  # then open`).
    [hint] = [ln for ln in rl_out.splitlines() if ln.startswith("open it:")]
    command = shlex.split(hint.removeprefix("open it:").split("  # ")[0])
    assert command[:2] == ["mlflow", "ui"] and "--app-name" in command, hint
    # One worker, as printed: mlflow's default 4 crash-loop on a busy 2-core machine.
    assert command[command.index("--workers") + 1] == "1", hint
    server = subprocess.Popen(
        [*MLFLOW, *command[1:], "--host", "127.0.0.1", "--port", str(port)],
        cwd=cwd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(url + "/health", timeout=2):
                    break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError((cwd / "mlflow-ui.log").read_text()) from None
                time.sleep(0.5)
        yield {
            "url": url, "run": run, "parent": parent, "rl": rl, "eval": ev,
            "chromium": chromium, "driver": driver, "profile": cwd / "chrome-profile",
        }  # fmt: skip
    finally:
        _stop(server)
        log.close()


@pytest.fixture(scope="module")
def browser(recorded):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = recorded["chromium"]
    for flag in [*CHROME_FLAGS, f"--user-data-dir={recorded['profile']}"]:
        opts.add_argument(flag)
    driver = webdriver.Chrome(service=Service(executable_path=recorded["driver"]), options=opts)
    driver.set_page_load_timeout(120)
    try:
        yield driver
    finally:
        driver.quit()


def _page(browser, url: str, *needles: str, shot: str, timeout: float = 120) -> str:
    """Open ``url``, wait until the page text holds every needle, save a screenshot."""
    browser.get(url)
    deadline = time.monotonic() + timeout
    text = ""
    while time.monotonic() < deadline:
        text = browser.execute_script("return document.body.innerText") or ""
        if all(n in text for n in needles):
            break
        time.sleep(1.0)
    time.sleep(1.5)  # let charts and fonts settle for the screenshot
    SHOTS.mkdir(parents=True, exist_ok=True)
    browser.save_screenshot(str(SHOTS / shot))
    missing = [n for n in needles if n not in text]
    assert not missing, f"{url}: {missing} not on the page; it shows:\n{text[:3000]}"
    return text


@pytest.mark.slow
def test_the_experiment_opens_on_its_runs_named_by_their_overrides(recorded, browser):
    name = recorded["run"].info.run_name
    assert name == "rl_round simulate.budget=200 seed=1"
    # The bare experiment URL, in a browser that never chose a view: the runs table, not the
    # GenAI Traces page MLflow 3.17 opens by default.
    text = _page(
        browser, f"{recorded['url']}/#/experiments/{recorded['rl'].experiment_id}", name,
        shot="1-experiment-runs.png",
    )  # fmt: skip
    assert f"/#/experiments/{recorded['rl'].experiment_id}/runs" in browser.current_url
    assert "No traces" not in text and "Run Name" in text


@pytest.mark.slow
def test_the_run_page_states_pass_at_1_with_its_interval(recorded, browser):
    run = recorded["run"]
    m = run.data.metrics
    headline = f"pass@1 {m['pass_at_1']:.3f} (95% CI {m['pass_at_1_ci_lo']:.3f}–{m['pass_at_1_ci_hi']:.3f})"
    _page(
        browser,
        f"{recorded['url']}/#/experiments/{recorded['rl'].experiment_id}/runs/{run.info.run_id}?{UI_VIEW}",
        run.info.run_name, headline, "Publish gate:", "Rows kept:",
        shot="2-rl_round-run.png",
    )  # fmt: skip


@pytest.mark.slow
def test_the_sweep_parent_shows_its_per_value_table(recorded, browser):
    parent = recorded["parent"]
    assert parent.info.run_name == "sweep eval simulate.budget=40 agent.skill=0.6,0.9"
    text = _page(
        browser,
        f"{recorded['url']}/#/experiments/{recorded['eval'].experiment_id}/runs/{parent.info.run_id}?{UI_VIEW}",
        "Sweep over", "agent.skill", "95% CI", "Re-run spread",
        shot="3-sweep-parent.png",
    )  # fmt: skip
    lines = [ln.strip() for ln in text.splitlines()]
    assert any(ln.startswith("0.6") for ln in lines) and any(ln.startswith("0.9") for ln in lines)


def _header_cols(browser) -> list[str]:
    """The runs table's column ids, left to right as shown."""
    return browser.execute_script(
        "return Array.from(document.querySelectorAll('.ag-header-cell[col-id]'))"
        ".sort((a,b)=>a.getBoundingClientRect().left-b.getBoundingClientRect().left)"
        ".map(e=>e.getAttribute('col-id'))"
    )


def _wait(browser, script: str, what: str, timeout: float = 120):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := browser.execute_script(script):
            return value
        time.sleep(1.0)
    raise AssertionError(f"{what}: not on the page after {timeout} s")


@pytest.mark.slow
def test_the_runs_table_opens_with_the_headline_metric_columns(recorded, browser):
    """Issue 23 §6: MLflow's runs table shows no metric column until the user picks some."""
    browser.get(f"{recorded['url']}/#/experiments/{recorded['rl'].experiment_id}")
    _wait(browser, "return document.querySelector('.ag-header-cell[col-id^=\"metrics.\"]')",
          "a metric column in the runs table")  # fmt: skip
    time.sleep(1.5)
    browser.save_screenshot(str(SHOTS / "4-runs-table-columns.png"))
    cols = [c for c in _header_cols(browser) if c.startswith("metrics.")]
    assert cols == [
        "metrics.`pass_at_1`", "metrics.`pass_at_1_ci_lo`", "metrics.`pass_at_1_ci_hi`",
        "metrics.`rows_kept`",
    ], cols  # fmt: skip
    shown = browser.execute_script(
        "return document.querySelector('.ag-row [col-id=\"metrics.`pass_at_1`\"]').innerText"
    )
    assert shown.strip() == str(recorded["run"].data.metrics["pass_at_1"])


#: The characters of a name the runs table paints before its ellipsis.
VISIBLE_TEXT = """
const link = arguments[0], node = document.createTreeWalker(link, NodeFilter.SHOW_TEXT).nextNode();
let right = Infinity;
for (let e = link; e && !e.classList.contains('ag-cell'); e = e.parentElement) {
  if (getComputedStyle(e).overflow !== 'visible') right = Math.min(right, e.getBoundingClientRect().right);
}
right = Math.min(right, link.closest('.ag-cell').getBoundingClientRect().right);
const range = document.createRange();
let n = 0;
for (; n < node.length; n++) {
  range.setStart(node, 0); range.setEnd(node, n + 1);
  if (range.getBoundingClientRect().right > right - 12) break;  // room for the ellipsis
}
return n === node.length ? node.data : node.data.slice(0, n);
"""


@pytest.mark.slow
def test_each_sweep_child_shows_the_value_it_ran(recorded, browser):
    """Issue 23 §6: the children read "eval simulate.bu…" side by side; the swept value
    must be in the part of the name the table shows."""
    browser.get(f"{recorded['url']}/#/experiments/{recorded['eval'].experiment_id}")
    expand = _wait(
        browser,
        "return document.querySelector('.ag-row [col-id=\"attributes.`Run Name`\"] button')",
        "the sweep parent's expand button",
    )
    expand.click()
    links = _wait(
        browser,
        "const a = Array.from(document.querySelectorAll("
        "'.ag-row [col-id=\"attributes.`Run Name`\"] a')); return a.length >= 3 && a",
        "the sweep's child runs",
    )
    time.sleep(1.5)
    browser.save_screenshot(str(SHOTS / "5-sweep-children.png"))
    shown = {browser.execute_script(VISIBLE_TEXT, a) for a in links}
    for value in ("0.6", "0.9"):
        assert any(f"skill={value}" in text for text in shown), shown


def _metric_names(text: str) -> list[str]:
    """The run page's metric table, names in the order shown (name, value, name, value...)."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    start = next(i for i, ln in enumerate(lines) if ln.startswith("Metrics ("))
    end = next(i for i, ln in enumerate(lines) if ln.startswith("Parameters ("))
    body = lines[start + 1 : end]
    body = body[body.index("Value") + 1 :] if "Value" in body else body
    return body[0::2]


@pytest.mark.slow
def test_the_run_page_lists_the_headline_metrics_first(recorded, browser):
    """Issue 23 §6: the run page listed rows_made and simulate.* before pass@1."""
    run = recorded["run"]
    text = _page(
        browser,
        f"{recorded['url']}/#/experiments/{recorded['rl'].experiment_id}/runs/{run.info.run_id}?{UI_VIEW}",
        "Metrics (", "pass_at_1_ci_hi", shot="6-rl_round-metrics.png",
    )  # fmt: skip
    names = _metric_names(text)
    assert names[:3] == ["pass_at_1", "pass_at_1_ci_lo", "pass_at_1_ci_hi"], names[:12]


@pytest.mark.slow
def test_the_sweep_parent_has_its_per_value_metrics(recorded, browser):
    """Issue 23 §6: the skill sweep's parent had 0 metrics."""
    parent = recorded["parent"]
    text = _page(
        browser,
        f"{recorded['url']}/#/experiments/{recorded['eval'].experiment_id}/runs/{parent.info.run_id}?{UI_VIEW}",
        "Metrics (", "pass_at_1/agent.skill:0.6", "pass_at_1/agent.skill:0.9",
        shot="7-sweep-parent-metrics.png",
    )  # fmt: skip
    names = _metric_names(text)
    assert "pass_at_1_ci_lo/agent.skill:0.6" in names and "delta/agent.skill:0.9 vs 0.6" in names


@pytest.mark.slow
def test_the_training_dataset_is_the_first_input(recorded, browser):
    """Issue 23 §6: the published training set was the 5th of 5 inputs ("simulate-rows +4")."""
    run = recorded["run"]
    text = _page(
        browser,
        f"{recorded['url']}/#/experiments/{recorded['rl'].experiment_id}/runs/{run.info.run_id}?{UI_VIEW}",
        "Datasets", "+4", shot="8-rl_round-datasets.png",
    )  # fmt: skip
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    first = lines[lines.index("Datasets") + 1]
    assert first.startswith("rl_round-rl (") and lines[lines.index("Datasets") + 2] == "Training"
