"""The one row reader: every step shape a row may carry, turned into the internal trajectory.

Every judge and report reads a rollout through ``read_steps``; none walks ``row["steps"]``
itself. Three families of shapes are accepted, step by step (one row may mix them):

* **internal** (what our engine writes, see ``rows.model``): ``{"kind": "assistant",
  "content", "tool_calls": [{"id", "name", "arguments"}]}``, ``{"kind": "tool",
  "tool_call_id", "name", "arguments", "result", "status", "fault"}``, ``{"kind": "user",
  "content"}``;
* **row-v1** (the spec's ecosystem): ``{"tool", "arguments", "result"}`` (one call and its
  answer; optional ``id``, ``status``, ``fault``, ``error``), ``{"text"}`` (an agent turn),
  ``{"user"}`` (a turn of the person);
* **chat messages**, in ``messages`` (read when ``steps`` is empty; τ-bench's result records
  call it ``traj``, see ``row_messages``) or in ``steps``:
  OpenAI ``{"role", "content"}`` with assistant ``tool_calls`` (``{"id", "function":
  {"name", "arguments": JSON}}``) answered by ``{"role": "tool", "tool_call_id",
  "content"}``; inspect_ai's messages, whose calls are ``{"id", "function": "<tool name>",
  "arguments": {...}}`` and whose tool answers name it in ``function`` (an ``error`` on one
  is read as its status); Anthropic content blocks (``text``, ``tool_use`` in an assistant turn,
  ``tool_result`` in a user turn, ``thinking`` skipped).

A step in none of these shapes is a ``RowShapeError`` naming the row's step and the shapes
accepted: a row is read or refused, never half-read.

Foreign shapes carry no ``status``; it is read from the answer, by fixed rules
(``result_status``): an ``error`` naming a timeout is the ``timeout`` fault, a server error
(``internal_error``, ``error``, ``server_error``, ``unavailable``, HTTP 5xx) the ``error``
fault, a refusal (``permission_denied``, ``forbidden``, ``unauthorized``, HTTP 401/403, or
an answer that starts "Permission denied") the ``permission_denied`` fault,
``malformed_result`` the ``malformed`` fault, ``invalid_arguments`` / ``unknown_tool`` the
agent's own ``invalid`` call; an
answer that starts as JSON and does not parse is ``malformed``; a tool result block marked
``is_error`` is at least an ``error``. Any other answer (``not_found``, a record) is ``ok``:
the world answered.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

#: The step shapes the reader accepts, as an error message lists them.
ACCEPTED_SHAPES: tuple[str, ...] = (
    'internal steps {"kind": "assistant" | "tool" | "user", ...}',
    'row-v1 steps {"tool", "arguments", "result"}, {"text"}, {"user"}',
    'chat messages {"role": "system" | "user" | "assistant" | "tool", "content"} '
    '(OpenAI or inspect_ai "tool_calls" / role "tool" answers, or Anthropic "tool_use" / '
    '"tool_result" content blocks), in steps or in messages',
)

_KINDS = frozenset({"assistant", "tool", "user"})
#: Keys of a row-v1 step that describe the model call (turn) it came from, not the tool:
#: on the step that opens a turn they belong to its assistant step.
ASSISTANT_META = frozenset(
    {
        "input_tokens",
        "output_tokens",
        "logprob",
        "n_tokens",
        "truncated",
        "token_logprobs",
        "logprobs_missing",
    }
)
#: The keys a row-v1 step of each kind spends on its own fields; the rest ride along.
_V1_TOOL_KEYS = frozenset(
    {
        "tool",
        "arguments",
        "result",
        "id",
        "status",
        "fault",
        "error",
        "text",
        "turn",
        "answered",
        "called",
    }
)
_V1_TEXT_KEYS = frozenset({"text", "turn"})
_V1_USER_KEYS = frozenset({"user"})
#: The ``kind`` of an internal step: a row whose steps are all dicts with one of these (an
#: exact ``str``) is already internal, and ``read_steps`` hands back its own step list.
STEP_KINDS = _KINDS
_ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function"})
_SKIPPED_BLOCKS = frozenset({"thinking", "redacted_thinking", "image", "document"})
_TIMEOUT = re.compile(r"time[sd]?[ _-]?out|timed[ _-]out|deadline", re.I)
_SERVER = re.compile(
    r"^(internal[ _-]?error|error|server[ _-]?error|unavailable|service[ _-]?unavailable|"
    r"upstream[ _-]?error|bad[ _-]?gateway|failed|failure)$",
    re.I,
)
_INVALID = re.compile(
    r"^(invalid[ _-]?arguments?|unknown[ _-]?tool|invalid|bad[ _-]?request)$", re.I
)
_ERROR_TEXT = re.compile(r"^\s*(error|exception|failed)\b", re.I)
#: The tool refused the caller: the call did nothing (the reference's ``permission_denied``).
_DENIED = re.compile(
    r"permission|forbidden|unauthori[sz]ed|access[ _-]?denied|not[ _-]?authori[sz]ed|"
    r"not[ _-]?permitted|^denied$|insufficient[ _-]?(scope|privileges?)",
    re.I,
)
_DENIED_TEXT = re.compile(
    r"^\s*(permission[ _-]?denied|access[ _-]?denied|forbidden|unauthori[sz]ed|"
    r"not[ _-]?(authori[sz]ed|permitted))\b",
    re.I,
)
#: An answer the tool itself calls unreadable (the reference's ``malformed_result``).
_MALFORMED = re.compile(r"^malformed([ _-]?(result|response|output))?$", re.I)


#: Top-level keys a transcript of chat messages is found under, in the order they are tried:
#: ``messages`` (OpenAI fine-tuning, TRL), ``traj`` (τ-bench result records).
TRANSCRIPT_KEYS: tuple[str, ...] = ("messages", "traj")


_THINK = re.compile(r"<think>.*?(?:</think>|$)", re.DOTALL | re.IGNORECASE)


def spoken(reply: str) -> str:
    """``reply`` without ``<think>`` blocks and surrounding whitespace: what the person
    reads (``""`` for a reply that is only a model's reasoning, or nothing)."""
    if "<think" in reply.lower():
        reply = _THINK.sub(" ", reply)
    return reply.strip()


def row_messages(row: Mapping[str, Any]) -> Any:
    """The row's chat transcript: the first non-empty value under ``TRANSCRIPT_KEYS``, else
    None. Never raises; the value is returned as it is (``read_steps`` checks its shape)."""
    for key in TRANSCRIPT_KEYS:
        value = row.get(key)
        if value:
            return value
    return None


def first_user_text(messages: Any) -> str | None:
    """The text of the first user turn of a chat transcript (the ask), or None when it has
    none. Content blocks are joined; never raises."""
    if not isinstance(messages, list | tuple):
        return None
    for msg in messages:
        if isinstance(msg, Mapping) and msg.get("role") == "user":
            content = msg.get("content")
            if isinstance(content, list):
                content = "\n".join(
                    str(b.get("text", ""))
                    for b in content
                    if isinstance(b, Mapping) and b.get("type") in ("text", "input_text")
                )
            return None if content is None else str(content)
    return None


def _known(value: Any, names: frozenset[str]) -> bool:
    return isinstance(value, str) and value in names


class RowShapeError(ValueError):
    """A row whose steps (or messages) match none of the accepted shapes."""


def _refuse(where: str, value: Any) -> RowShapeError:
    if isinstance(value, Mapping):
        got = f"a dict with keys {sorted(map(str, value))[:8]}"
    else:
        got = f"a {type(value).__name__}"
    shapes = "; ".join(ACCEPTED_SHAPES)
    return RowShapeError(f"{where} is {got}, which is no known step shape. Accepted: {shapes}")


# ---------------------------------------------------------------------------------------
# Tool answers.
# ---------------------------------------------------------------------------------------


def _code_status(code: Any) -> str | None:
    """The status an ``error`` value names, or None when it names a world answer."""
    if isinstance(code, bool):
        return "error" if code else None
    if isinstance(code, int):
        if code in (401, 403):
            return "permission_denied"
        return "error" if code >= 500 else None
    if isinstance(code, Mapping):
        inner = code.get("type", code.get("code", code.get("message")))
        return _code_status(inner) if inner is not None else "error"
    text = str(code).strip()
    if not text:
        return None
    if _TIMEOUT.search(text):
        return "timeout"
    if _DENIED.search(text) or re.fullmatch(r"40[13]", text):
        return "permission_denied"
    if _MALFORMED.match(text):
        return "malformed"
    if _INVALID.match(text):
        return "invalid"
    if _SERVER.match(text) or re.search(r"\b5\d\d\b", text):
        return "error"
    return None


def result_status(result: Any) -> str:
    """The status a tool's answer shows: ``timeout``, ``error``, ``malformed``,
    ``permission_denied``, ``invalid`` or ``ok`` (see the module docstring for the rules).
    Never raises."""
    if isinstance(result, Mapping):
        if "error" in result and result["error"] not in (None, "", False):
            return _code_status(result["error"]) or "ok"
        status = result.get("status")
        if isinstance(status, str) and status.lower() in ("error", "failed", "timeout"):
            return "timeout" if status.lower() == "timeout" else "error"
        if isinstance(status, str | int) and _code_status(status) == "permission_denied":
            return "permission_denied"
        return "ok"
    if isinstance(result, str):
        text = result.strip()
        if text[:1] in ("{", "["):
            try:
                parsed = json.loads(text)
            except ValueError:
                return "malformed"
            return result_status(parsed)
        if _DENIED_TEXT.match(text):
            return "permission_denied"
        if _ERROR_TEXT.match(text) or (_TIMEOUT.search(text) and len(text) < 200):
            return "timeout" if _TIMEOUT.search(text) else "error"
    return "ok"


def _parsed(content: Any) -> Any:
    """A tool message's content: JSON text read back into the value it carries, text
    blocks joined, anything else as it is."""
    if isinstance(content, list):
        texts = [str(b.get("text", "")) for b in content if isinstance(b, Mapping) and "text" in b]
        if len(texts) == len(content):
            content = "".join(texts)
    if isinstance(content, str) and content.strip()[:1] in ("{", "["):
        try:
            return json.loads(content)
        except ValueError:
            return content
    return content


def _tool_step(
    call_id: str,
    name: str,
    arguments: Any,
    result: Any,
    *,
    status: Any = None,
    fault: Any = None,
    is_error: bool = False,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    if status is None:
        status = result_status(result)
        if is_error and status == "ok":
            status = "error"
        if fault is None and status not in ("ok", "invalid"):
            fault = status
    step = dict(extra or {})
    step.update(
        kind="tool",
        tool_call_id=call_id,
        name=name,
        arguments=arguments if isinstance(arguments, dict) else {},
        result=result,
        status=str(status),
        fault=None if fault in (None, "", False) else str(fault),
    )
    return step


def call_parts(call: Mapping[str, Any]) -> tuple[Any, Any]:
    """``(tool name, raw arguments)`` of one assistant tool call, in any accepted shape:
    OpenAI's ``{"function": {"name", "arguments": JSON}}``, a flat ``{"name",
    "arguments"}``, or inspect_ai's ``{"function": "<tool name>", "arguments": {...}}``
    (where ``function`` is the name itself). The one place the shapes are told apart."""
    fn = call.get("function")
    if isinstance(fn, str):
        return fn, call.get("arguments")
    fn = fn if isinstance(fn, Mapping) else call
    return fn.get("name"), fn.get("arguments")


def answer_name(msg: Mapping[str, Any]) -> Any:
    """The tool a ``role: "tool"`` message answers for: ``name`` (OpenAI, TRL) or
    inspect_ai's ``function``; None when it names none."""
    fn = msg.get("function")
    return msg.get("name") or (fn if isinstance(fn, str) else None)


#: inspect_ai's ``ToolCallError.type`` values that are not world faults: the agent's own
#: unparseable call, and a file the world says is not there (an answer, not a fault).
_INSPECT_ERRORS = {"parsing": "invalid", "file_not_found": "ok", "is_a_directory": "ok"}


def _inspect_error_status(error: Any) -> str:
    """The status of an inspect_ai tool message's ``error``: its ``type`` read by the
    rules every answer is read by, ``parsing`` as the agent's ``invalid`` call."""
    kind = error.get("type") if isinstance(error, Mapping) else error
    if isinstance(kind, str) and kind in _INSPECT_ERRORS:
        return _INSPECT_ERRORS[kind]
    return _code_status(kind) or "error"


def _arguments(raw: Any) -> dict[str, Any]:
    if isinstance(raw, str):
        try:
            raw = json.loads(raw) if raw.strip() else {}
        except ValueError:
            return {"_unparsed": raw}
    if raw is None:
        return {}
    return dict(raw) if isinstance(raw, Mapping) else {"_value": raw}


def _text(content: Any) -> str:
    if content is None:
        return ""
    return content if isinstance(content, str) else str(content)


# ---------------------------------------------------------------------------------------
# The shapes.
# ---------------------------------------------------------------------------------------


class _Reader:
    """Turns one row's steps into internal steps, one step at a time."""

    def __init__(self, prompt: str | None, where: str) -> None:
        self.prompt = prompt
        self.where = where
        self.steps: list[dict[str, Any]] = []
        # call id -> (tool name, arguments): a chat transcript puts both on the call and
        # only the id on its answer, and judges read the arguments off the tool step.
        self.calls: dict[str, tuple[str, dict[str, Any]]] = {}
        self.open: list[str] = []  # calls not answered yet, in the order they were made
        self.n_calls = 0
        self.seen_ask = False
        # (turn, its assistant step) while row-v1 steps of one model call are being read
        self.turn: tuple[Any, dict[str, Any]] | None = None

    def _call_id(self, given: Any) -> str:
        self.n_calls += 1
        return str(given) if given not in (None, "") else f"call_{self.n_calls}"

    def _call(self, given_id: Any, name: Any, raw_arguments: Any) -> dict[str, Any]:
        """One tool call of an assistant turn, remembered until its answer comes."""
        call_id = self._call_id(given_id)
        args = _arguments(raw_arguments)
        self.calls[call_id] = (str(name or ""), args)
        self.open.append(call_id)
        return {"id": call_id, "name": str(name or ""), "arguments": args}

    def _answer(self, given_id: Any, name: Any) -> tuple[str, str, dict[str, Any]]:
        """(call id, tool name, arguments) of the call a tool answer answers. An answer
        without a known id (TRL's tool messages carry only the tool's ``name``) answers the
        oldest open call of that name, else the oldest open call."""
        call_id = "" if given_id in (None, "") else str(given_id)
        if call_id not in self.calls:
            named = [c for c in self.open if name and self.calls[c][0] == str(name)]
            pick = named or self.open
            if call_id == "" and pick:
                call_id = pick[0]
        if call_id in self.open:
            self.open.remove(call_id)
        known_name, args = self.calls.get(call_id, ("", {}))
        return call_id, str(name or known_name), args

    def internal(self, i: int, step: Mapping[str, Any]) -> None:
        if not _known(step.get("kind"), _KINDS):
            raise _refuse(f"{self.where}[{i}]", step)
        self.turn = None
        self.steps.append(step if type(step) is dict else dict(step))

    def _open_turn(self, turn: Any) -> dict[str, Any] | None:
        """The assistant step of agent turn ``turn`` when the step just read belongs to it
        (row-v1 steps of one model call carry the same ``turn``), else None."""
        if turn is None or self.turn is None or self.turn[0] != turn:
            return None
        return self.turn[1]

    def row_v1(self, step: Mapping[str, Any]) -> None:
        turn = step.get("turn")
        if "tool" in step:
            self._row_v1_tool(step, turn)
        elif "text" in step:
            extra = {k: v for k, v in step.items() if k not in _V1_TEXT_KEYS}
            assistant = {**extra, "kind": "assistant", "content": _text(step["text"])}
            assistant["tool_calls"] = []
            self.steps.append(assistant)
            self.turn = None if turn is None else (turn, assistant)
        else:
            extra = {k: v for k, v in step.items() if k not in _V1_USER_KEYS}
            self.steps.append({**extra, "kind": "user", "content": _text(step["user"])})
            self.turn = None

    def _row_v1_tool(self, step: Mapping[str, Any], turn: Any) -> None:
        """One row-v1 tool step: a call and its answer. ``called: false`` is an answer with
        no call in the transcript; ``answered: false`` a call no answer came for."""
        extra = {k: v for k, v in step.items() if k not in _V1_TOOL_KEYS}
        call_id = self._call_id(step.get("id"))
        args = _arguments(step.get("arguments"))
        name = str(step["tool"])
        if step.get("called") is not False:
            assistant = self._open_turn(turn)
            if assistant is None:
                # The step opens a model call: what the spec puts on a tool step about the
                # turn (its logprob, tokens, cut) belongs to the assistant step.
                meta = {k: extra.pop(k) for k in [k for k in extra if k in ASSISTANT_META]}
                assistant = {**meta, "kind": "assistant", "content": _text(step.get("text"))}
                assistant["tool_calls"] = []
                self.steps.append(assistant)
                self.turn = None if turn is None else (turn, assistant)
            elif step.get("text"):
                joined = assistant["content"] + ("\n" if assistant["content"] else "")
                assistant["content"] = joined + _text(step["text"])
            assistant["tool_calls"].append({"id": call_id, "name": name, "arguments": args})
            if step.get("answered") is False:
                return
        else:
            self.turn = None
        result = step.get("result")
        if result is None and step.get("error") not in (None, ""):
            result = {"error": step["error"]}
        self.steps.append(
            _tool_step(
                call_id,
                name,
                args,
                result,
                status=step.get("status"),
                fault=step.get("fault"),
                extra=extra,
            )
        )

    def message(self, i: int, msg: Mapping[str, Any], *, full_transcript: bool) -> None:
        self.turn = None
        role = msg.get("role")
        if not _known(role, _ROLES):
            raise _refuse(f"{self.where}[{i}]", msg)
        content = msg.get("content")
        if role in ("system", "developer"):
            return
        if role == "user":
            self._user_message(i, content, full_transcript=full_transcript)
        elif role == "assistant":
            self._assistant_message(i, msg, content)
        else:  # tool / function: one OpenAI (or inspect_ai) tool answer
            call_id, name, args = self._answer(msg.get("tool_call_id"), answer_name(msg))
            error = msg.get(
                "error"
            )  # inspect_ai: {"type": "timeout" | "permission" ..., "message"}
            status = _inspect_error_status(error) if error else None
            self.steps.append(
                _tool_step(
                    call_id,
                    name,
                    args,
                    _parsed(content),
                    status=status,
                    fault=status if status not in (None, "ok", "invalid") else None,
                )
            )

    def _blocks(self, i: int, content: Any) -> list[Mapping[str, Any]] | None:
        """Content blocks of a message, or None for plain text content."""
        if not isinstance(content, list):
            return None
        blocks = []
        for block in content:
            if not isinstance(block, Mapping) or not isinstance(block.get("type"), str):
                raise _refuse(f"{self.where}[{i}].content", block)
            blocks.append(block)
        return blocks

    def _user_message(self, i: int, content: Any, *, full_transcript: bool) -> None:
        blocks = self._blocks(i, content)
        texts: list[str] = []
        for block in blocks or ():
            kind = block["type"]
            if kind == "tool_result":
                call_id, name, args = self._answer(block.get("tool_use_id"), None)
                self.steps.append(
                    _tool_step(
                        call_id,
                        name,
                        args,
                        _parsed(block.get("content")),
                        is_error=bool(block.get("is_error")),
                    )
                )
            elif kind in ("text", "input_text"):
                texts.append(_text(block.get("text")))
            elif kind not in _SKIPPED_BLOCKS:
                raise _refuse(f"{self.where}[{i}].content", block)
        text = _text(content) if blocks is None else "\n".join(texts)
        if blocks is not None and not texts:
            return
        # The opening user turn is the ask itself, not a follow-up: always so in a full
        # transcript, and in role-shaped steps when it repeats the row's prompt.
        if (
            not self.seen_ask
            and not self.steps
            and (full_transcript or self.prompt is None or text == self.prompt)
        ):
            self.seen_ask = True
            if self.prompt is None:
                self.prompt = text
            return
        self.steps.append({"kind": "user", "content": text})

    def _assistant_message(self, i: int, msg: Mapping[str, Any], content: Any) -> None:
        blocks = self._blocks(i, content)
        calls: list[dict[str, Any]] = []
        texts: list[str] = []
        for block in blocks or ():
            kind = block["type"]
            if kind in ("text", "output_text"):
                texts.append(_text(block.get("text")))
            elif kind == "tool_use":
                calls.append(self._call(block.get("id"), block.get("name"), block.get("input")))
            elif kind not in _SKIPPED_BLOCKS:
                raise _refuse(f"{self.where}[{i}].content", block)
        reqs = msg.get("tool_calls")
        if reqs is not None and not isinstance(reqs, list | tuple):
            raise _refuse(f"{self.where}[{i}].tool_calls", reqs)
        for req in reqs or ():
            if not isinstance(req, Mapping):
                raise _refuse(f"{self.where}[{i}].tool_calls", req)
            name, raw_arguments = call_parts(req)
            if not isinstance(name, str) or not name.strip():
                raise RowShapeError(
                    f"{self.where}[{i}].tool_calls: a tool call with no tool name (keys "
                    f"{sorted(map(str, req))[:8]}); write it as OpenAI's "
                    '{"id", "function": {"name", "arguments"}} or inspect_ai\'s '
                    '{"id", "function": "<tool name>", "arguments"}. Accepted: '
                    + "; ".join(ACCEPTED_SHAPES)
                )
            calls.append(self._call(req.get("id"), name, raw_arguments))
        if msg.get("function_call") and isinstance(msg["function_call"], Mapping):
            fc = msg["function_call"]
            calls.append(self._call(None, fc.get("name"), fc.get("arguments")))
        text = _text(content) if blocks is None else "".join(texts)
        self.steps.append({"kind": "assistant", "content": text, "tool_calls": calls})


def _is_internal(steps: list[Any] | tuple[Any, ...]) -> bool:
    # A plain loop, not all(genexpr): every report calls this once per row, on 100k rows.
    for step in steps:  # noqa: SIM110
        if type(step) is not dict:
            return False
        kind = step.get("kind")
        if kind.__class__ is not str or kind not in _KINDS:
            return False
    return True


def read_steps(row: Mapping[str, Any]) -> tuple[str, list[dict[str, Any]]]:
    """``(prompt, steps)`` of a row as internal steps, whatever shape it was written in.

    ``steps`` when the row has any, else its ``messages`` (or τ-bench's ``traj``,
    ``row_messages``: a transcript, whose first user
    turn is the ask and becomes the prompt when the row has none). A row already in the
    internal shape comes back with its own step list, not a copy. Raises ``RowShapeError``
    (a ``ValueError``) naming the first step that matches no accepted shape, and the
    shapes accepted; a row with neither steps nor messages has no steps.
    """
    prompt_raw = row.get("prompt")
    prompt = None if prompt_raw is None else str(prompt_raw)
    steps = row.get("steps")
    if steps is not None and not isinstance(steps, list | tuple):
        raise _refuse("steps", steps)
    if steps:
        if _is_internal(steps):
            return ("" if prompt is None else prompt), (
                steps if isinstance(steps, list) else list(steps)
            )
        reader = _Reader(prompt, "steps")
        for i, step in enumerate(steps):
            if not isinstance(step, Mapping):
                raise _refuse(f"steps[{i}]", step)
            if "kind" in step:
                reader.internal(i, step)
            elif "role" in step:
                reader.message(i, step, full_transcript=False)
            elif "tool" in step or "text" in step or "user" in step:
                reader.row_v1(step)
            else:
                raise _refuse(f"steps[{i}]", step)
        return ("" if reader.prompt is None else reader.prompt), reader.steps
    messages = row_messages(row)
    if not messages:
        return ("" if prompt is None else prompt), []
    where = "messages" if row.get("messages") else "traj"
    if not isinstance(messages, list | tuple):
        raise _refuse(where, messages)
    reader = _Reader(prompt, where)
    for i, msg in enumerate(messages):
        if not isinstance(msg, Mapping):
            raise _refuse(f"{where}[{i}]", msg)
        reader.message(i, msg, full_transcript=True)
    return ("" if reader.prompt is None else reader.prompt), reader.steps


def check_rows(rows: Any, what: str = "rows") -> None:
    """Raise ``RowShapeError`` for the first row whose steps no shape reads, naming its
    index (and ``rollout_id`` when it has one). Returns None when every row reads."""
    for index, row in enumerate(rows):
        if not isinstance(row, Mapping):
            continue  # not a row at all: the caller's own type check says so
        try:
            read_steps(row)
        except RowShapeError as exc:
            rid = row.get("rollout_id") or row.get("scenario_id")
            name = f"{what}[{index}]" + (f" ({rid})" if rid else "")
            raise RowShapeError(f"{name}: {exc}") from None


def internal_row(row: Mapping[str, Any]) -> Mapping[str, Any]:
    """``row`` itself when its steps are internal already, else a shallow copy whose
    ``steps`` (and ``prompt``, ``final_text`` when missing) are read by ``read_steps``.
    Raises ``RowShapeError`` as ``read_steps`` does."""
    steps = row.get("steps")
    if steps and isinstance(steps, list) and _is_internal(steps):
        return row
    prompt, read = read_steps(row)
    if not read and not steps:
        return row
    out = dict(row)
    out["steps"] = read
    if out.get("prompt") is None:
        out["prompt"] = prompt
    if not out.get("final_text"):
        last = next((s for s in reversed(read) if s.get("kind") == "assistant"), None)
        if last is not None and not last.get("tool_calls") and last.get("content"):
            out["final_text"] = last["content"]
    return out
