"""``mlflow ui --app-name wai-exp``: MLflow's own tracking server, opening experiments on
their runs.

MLflow 3.17's UI no longer reads an experiment's ``mlflow.experimentKind`` tag to pick its
view (the flag that made it do so is built in as off; checked in the 3.17.2 bundle): it
shows the GenAI view (the Overview/Traces tabs) or the model-training view (the runs table)
from the URL's ``?workflowType=``, else from the browser's last explicit switch (local
storage ``mlflow.workflowType_v1``), else GenAI. So a bare experiment URL opens on "Traces"
in every fresh browser, whatever the experiment holds.

The runs table's columns are browser state too: the 3.17 UI keeps an experiment page's
view (selected columns, their order and widths) in local storage under
``MLflowLocalStorage-1.1-ExperimentPage-["<ids>"]-ReactComponentState``, and with none
saved it shows Source, Models and Dataset, no metric column, and a 190 px Run Name column
that cuts a nested run's name after about 20 characters. No experiment tag sets it (a
"shared view" tag applies only to a URL carrying its ``viewStateShareKey``).

This app is MLflow's FastAPI app (``mlflow.server.fastapi_app:app``, what ``mlflow ui``
serves) with one change: the UI page gets a first script that, where the browser has saved
nothing, (1) records "model training" as its view choice, so a bare experiment URL opens
its runs; (2) reads :data:`RUNS_VIEW` as an experiment page's saved view: the headline
metric columns (``pass_at_1`` and its interval, or a before/after run's ``delta`` and its
interval; ``rows_kept``) first, a 320 px Run Name column, and the Dataset; (3) records the
MLflow Assistant panel as already shown, so it does not open by itself over a third of the
table. Whatever the user then chooses is saved by MLflow as usual and wins; every API route
is MLflow's, untouched. Registered as the ``mlflow.app`` entry point ``wai-exp``
(pyproject.toml).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from mlflow.server.fastapi_app import app as mlflow_app

from wai_exp.tracking.summary import DELTA_HEADLINE_KEYS, HEADLINE_KEYS

#: The local-storage entry the 3.17 UI keeps its GenAI / model-training switch in
#: (``<key>_v<version>``, a JSON value).
VIEW_KEY = "mlflow.workflowType_v1"
VIEW = "machine_learning"
#: Set once the 3.17 UI has opened its Assistant panel by itself ("on first load").
ASSISTANT_KEY = "mlflow.assistant.fab.autoOpenedOnFirstLoad_v1"
#: An experiment page's saved view: ``MLflowLocalStorage-<version>-<scope>-<key>``.
PAGE_STATE_KEY = r"^MLflowLocalStorage-1\.1-ExperimentPage-.*-ReactComponentState$"
#: The headline columns a wai-exp run fills (a column no run in the experiment has is not
#: shown): the answer with its interval, then rows kept.
HEADLINE_COLUMNS = [
    f"metrics.`{name}`"
    for name in (*(k for k, _ in HEADLINE_KEYS[:3]), *(k for k, _ in DELTA_HEADLINE_KEYS[:3]))
] + ["metrics.`rows_kept`"]
#: The runs table as it opens in a browser with no saved view for the experiment (MLflow's
#: column ids: ``attributes.`Run Name```, ``runDateAndNestInfo`` is Created).
RUNS_VIEW = {
    # MLflow's default search (a saved view holds it too; without it the table never loads)
    "searchFilter": "",
    "orderByKey": "attributes.start_time",
    "orderByAsc": False,
    "startTime": "ALL",
    "lifecycleFilter": "Active",
    "datasetsFilter": [],
    "modelVersionFilter": "All Runs",
    "selectedColumns": [*HEADLINE_COLUMNS, "attributes.`Dataset`"],
    "columnOrder": [
        "attributes.`Run Name`",
        "runDateAndNestInfo",
        *HEADLINE_COLUMNS,
        "duration",
        "attributes.`Dataset`",
    ],
    "columnWidths": {"attributes.`Run Name`": 320},
}
SCRIPT = (
    "<script>try{"
    f"if(localStorage.getItem('{VIEW_KEY}')===null)"
    f"localStorage.setItem('{VIEW_KEY}','\"{VIEW}\"');"
    f"if(localStorage.getItem('{ASSISTANT_KEY}')===null)"
    f"localStorage.setItem('{ASSISTANT_KEY}','true');"
    f"var g=Storage.prototype.getItem,k=new RegExp({json.dumps(PAGE_STATE_KEY)}),"
    f"v={json.dumps(json.dumps(RUNS_VIEW))};"
    "Storage.prototype.getItem=function(n){var x=g.call(this,n);"
    "return x===null&&k.test(n)?v:x}"
    "}catch(e){}</script>"
).encode()

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


def with_default_view(html: bytes) -> bytes:
    """The UI page with :data:`SCRIPT` as the first thing in its ``<head>`` (before MLflow's
    bundle reads the stored view); other HTML is returned as it is."""
    return html.replace(b"<head>", b"<head>" + SCRIPT, 1) if b"<head>" in html else html


class DefaultViewApp:
    """ASGI middleware: uncompressed ``text/html`` responses to GET requests pass through
    :func:`with_default_view`; everything else streams through unchanged."""

    def __init__(self, app: Callable[[Scope, Receive, Send], Awaitable[None]]) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("type") != "http" or scope.get("method") != "GET":
            await self.app(scope, receive, send)
            return
        start: Message | None = None
        chunks: list[bytes] = []

        async def rewrite(message: Message) -> None:
            nonlocal start
            if message["type"] == "http.response.start":
                headers = {k.lower(): v for k, v in message.get("headers", [])}
                html = headers.get(b"content-type", b"").startswith(b"text/html")
                if html and b"content-encoding" not in headers:
                    start = message  # hold it: the length changes
                    return
                await send(message)
                return
            if start is None or message["type"] != "http.response.body":
                await send(message)
                return
            chunks.append(message.get("body", b""))
            if message.get("more_body"):
                return
            body = with_default_view(b"".join(chunks))
            raw = [(k, v) for k, v in start.get("headers", []) if k.lower() != b"content-length"]
            raw.append((b"content-length", str(len(body)).encode()))
            await send({**start, "headers": raw})
            await send({"type": "http.response.body", "body": body})

        await self.app(scope, receive, rewrite)


app = DefaultViewApp(mlflow_app)
