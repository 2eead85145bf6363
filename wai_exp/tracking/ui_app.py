"""``mlflow ui --app-name wai-exp``: MLflow's own tracking server, opening experiments on
their runs.

MLflow 3.17's UI no longer reads an experiment's ``mlflow.experimentKind`` tag to pick its
view (the flag that made it do so is built in as off; checked in the 3.17.2 bundle): it
shows the GenAI view (the Overview/Traces tabs) or the model-training view (the runs table)
from the URL's ``?workflowType=``, else from the browser's last explicit switch (local
storage ``mlflow.workflowType_v1``), else GenAI. So a bare experiment URL opens on "Traces"
in every fresh browser, whatever the experiment holds.

This app is MLflow's FastAPI app (``mlflow.server.fastapi_app:app``, what ``mlflow ui``
serves) with one change: the UI page gets a first script that records "model training" as
the browser's choice when it has made none. A bare experiment URL then opens its runs; a
user who switches to GenAI in the sidebar keeps GenAI; every API route is MLflow's,
untouched. Registered as the ``mlflow.app`` entry point ``wai-exp`` (pyproject.toml).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from mlflow.server.fastapi_app import app as mlflow_app

#: The local-storage entry the 3.17 UI keeps its GenAI / model-training switch in
#: (``<key>_v<version>``, a JSON value).
VIEW_KEY = "mlflow.workflowType_v1"
VIEW = "machine_learning"
SCRIPT = (
    f"<script>try{{if(localStorage.getItem('{VIEW_KEY}')===null)"
    f"localStorage.setItem('{VIEW_KEY}','\"{VIEW}\"')}}catch(e){{}}</script>"
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
