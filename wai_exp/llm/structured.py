"""Structured output: ask an OpenAI-compatible server to answer with JSON of a given schema
(the judges' verdicts, the model writer's cards), and step down cleanly when it refuses.

Forms of the ``response_format`` a request can carry, in the order ``auto`` tries them:

* ``json_schema``: ``{"type": "json_schema", "json_schema": {"name", "schema", "strict":
  true}}``, what OpenAI, vLLM, Ollama and llama.cpp's own ``llama-server`` accept;
* ``json_object``: ``{"type": "json_object", "schema": ...}``, the only form
  llama-cpp-python's server (0.3.x) takes: it constrains decoding to the schema with a
  grammar, also under ``--chat_format chatml-function-calling`` when no tools are sent, and
  answers ``json_schema`` with HTTP 500 (``literal_error``). In this form every string
  without a bound gets ``maxLength`` (``max_string_chars``): under a grammar a small model
  never has to close a string, and SmolLM2-135M wrote its verdict's ``reason`` until
  ``max_tokens`` cut the JSON off. The ``json_schema`` form carries the schema as given
  (OpenAI's strict mode refuses keywords it does not support);
* none: the schema is only described in the prompt.

A server that refuses a form (HTTP 400/422, or any error whose body names
``response_format``) gets the same request once more with the next form. A refusal that
names ``response_format`` is kept at once; another (a bare 400) once a later form is
answered. The step is kept for the rest of the run (``StructuredOutput.fallback`` says what
was refused and why), so a refusing server costs one extra request per run, not per call. Anthropic backends get no
``response_format`` (their API has none of these forms).
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from wai_exp.domain.secrets import redact_text

if TYPE_CHECKING:
    from wai_exp.llm.turn import ChatBackend, Completion

#: Accepted values of ``structured_output`` options (``judge.structured_output``, the
#: ``writer_structured_output`` knob).
MODES = ("auto", "json_schema", "json_object", "off")
#: The forms each mode tries, in order (``None`` = no ``response_format``).
_LADDER: dict[str, tuple[str | None, ...]] = {
    "auto": ("json_schema", "json_object", None),
    "json_schema": ("json_schema", None),
    "json_object": ("json_object", None),
    "off": (None,),
}
#: Statuses that mean "this request is not one I take" whatever the body says.
_REFUSAL_STATUSES = frozenset({400, 422})
#: Characters of a refusal's body kept in the fallback note.
NOTE_BODY_CHARS = 160


def check_mode(value: Any, what: str) -> str:
    """``value`` when it is one of ``MODES``; ``ValueError`` naming ``what`` and the choices
    otherwise."""
    if value not in MODES:
        raise ValueError(f"{what}={value!r}: use one of {', '.join(MODES)}")
    return str(value)


def response_format(
    form: str | None, name: str, schema: dict[str, Any], max_string_chars: int | None = None
) -> dict[str, Any] | None:
    """The ``response_format`` body of one form (None for none); the ``json_object`` form's
    strings are bounded by ``max_string_chars`` when given."""
    if form == "json_schema":
        return {
            "type": "json_schema",
            "json_schema": {"name": name, "schema": schema, "strict": True},
        }
    if form == "json_object":
        if max_string_chars:
            schema = bound_strings(schema, max_string_chars)
        return {"type": "json_object", "schema": schema}
    return None


def bound_strings(schema: Any, max_chars: int) -> Any:
    """A copy of ``schema`` in which every ``"type": "string"`` without ``maxLength`` has
    ``maxLength: max_chars``. Never raises."""
    if isinstance(schema, list):
        return [bound_strings(s, max_chars) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: bound_strings(v, max_chars) for k, v in schema.items()}
    if out.get("type") == "string" and "enum" not in out and "maxLength" not in out:
        out["maxLength"] = max_chars
    return out


def is_refusal(exc: BaseException) -> bool:
    """True when a failed call reads as the server refusing ``response_format`` (so the same
    request without it may pass): HTTP 400/422, or an error whose text names
    ``response_format``. Timeouts and unreachable servers are not refusals."""
    status = getattr(exc, "status", None)
    if not isinstance(status, int):
        return False
    return status in _REFUSAL_STATUSES or "response_format" in str(exc)


def refusal_response(status: int, body: str) -> bool:
    """For ``post_json(final=...)``: a response that refuses ``response_format`` is final at
    once, not retried like a server fault (llama-cpp-python answers an unknown form with a
    500 naming it; retrying cannot help)."""
    return status >= 400 and "response_format" in body


class StructuredOutput:
    """One schema asked for by one caller (a judge, the writer) across its calls.

    ``name`` and ``schema`` describe the JSON wanted; ``mode`` is one of ``MODES``;
    ``max_string_chars`` bounds the strings of the ``json_object`` form (see the module's
    docstring). Thread safe: the writer calls from its own loop thread while the engine
    reads ``meta()``.
    Raises ``ValueError`` for an unknown mode.
    """

    def __init__(
        self, mode: str, name: str, schema: dict[str, Any], *, max_string_chars: int | None = None
    ) -> None:
        self.mode = check_mode(mode, "structured_output")
        self.name = name
        self.schema = schema
        self.max_string_chars = max_string_chars
        self._ladder = _LADDER[self.mode]
        self._step = 0
        self._lock = threading.Lock()
        #: ``"<form> refused (HTTP 500: ...)"`` entries, one per step down, oldest first
        self.fallbacks: list[str] = []

    @property
    def form(self) -> str | None:
        """The form requests carry now (None = none)."""
        return self._ladder[min(self._step, len(self._ladder) - 1)]

    @property
    def fallback(self) -> str | None:
        """What the server refused and what is sent instead, or None when nothing was."""
        if not self.fallbacks:
            return None
        return "; ".join(self.fallbacks) + f"; now sending {self.form or 'no response_format'}"

    def meta(self, form: str | None = None) -> dict[str, Any]:
        """``structured_output`` (the form a call used, ``"off"`` for none) and, after a
        step down, ``structured_output_fallback``: what ``judge_meta`` / the writer report
        carry."""
        used = self.form if form is None else form
        out: dict[str, Any] = {"structured_output": used or "off"}
        if self.fallbacks:
            out["structured_output_fallback"] = self.fallback
        return out

    async def complete(
        self,
        backend: ChatBackend,
        messages: list[dict[str, Any]],
        sampling: dict[str, Any],
        *,
        schema: dict[str, Any] | None = None,
        max_string_chars: int | None = None,
    ) -> tuple[Completion, str | None]:
        """``(completion, the form it was asked with)``; ``schema`` and ``max_string_chars``
        replace the caller's for this call (a wave of 3 cards, a row's own rubric). A refusal of the current form sends
        the request again with the next one; the step is kept for later calls once a form
        is answered (a 400 that has nothing to do with ``response_format`` fails on every
        form and moves nothing). Any other failure, or a refusal of the last form, raises
        the backend's ``BackendError``."""
        if not getattr(backend, "accepts_response_format", False):
            return await backend.complete(messages, [], sampling), None
        start = i = self._step
        notes: list[str] = []
        while True:
            form = self._ladder[i]
            fmt = response_format(
                form, self.name, schema or self.schema, max_string_chars or self.max_string_chars
            )
            try:
                if fmt is None:
                    done = await backend.complete(messages, [], sampling)
                else:
                    done = await backend.complete(messages, [], sampling, response_format=fmt)
            except Exception as exc:
                if fmt is None or not is_refusal(exc) or i + 1 >= len(self._ladder):
                    raise
                status = getattr(exc, "status", None)
                # The note reaches judge_meta, the writer report and MLflow: a server that
                # quotes the request's credentials back must not carry them there.
                body = redact_text(str(exc).split(": ", 1)[-1][:NOTE_BODY_CHARS])
                note = f"{form} refused (HTTP {status}: {body})"
                i += 1
                if "response_format" in str(exc):
                    # A refusal that names the field is about the form whatever the next
                    # form does: kept at once, so a next form that times out does not send
                    # every later call back to the refused one first.
                    with self._lock:
                        if self._step < i:
                            self._step = i
                            self.fallbacks.append(note)
                else:
                    notes.append(note)
                continue
            if i > start:
                with self._lock:
                    if self._step < i:  # another call may have stepped down already
                        self._step = i
                        self.fallbacks.extend(notes)
            return done, form
