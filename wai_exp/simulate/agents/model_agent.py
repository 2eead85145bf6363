"""Agents backed by a model server (``openai:``, ``vllm:``, ``ollama:``, ``anthropic:``
specs, parsed in ``wai_exp.llm.providers``): the tool-calling loop they share."""

from __future__ import annotations

import inspect
import time
from typing import Any

import httpx

from wai_exp.llm.http import DEFAULT_RETRY, BackendError, RetryPolicy
from wai_exp.llm.model import Model
from wai_exp.llm.turn import (
    Completion,
    CompletionTimeout,
    Transcript,
    context_overflow,
)
from wai_exp.rows.model import messages_from_steps, step_messages
from wai_exp.simulate.run_health import CallTimes

DEFAULT_SAMPLING = {"temperature": 0.7, "max_tokens": 1024}


class ModelAgent:
    """A tool-calling agent loop over one model server.

    Calls the model, runs each requested tool through ``world.execute``, feeds results back,
    and stops on a reply with no tool call. A reply that asks the person a question gets
    their answer through ``world.ask_user`` (when the world offers it) and the loop goes on;
    ``None`` from it means they walked away (``ended_by="user_left"``).
    """

    def __init__(
        self,
        spec: str,
        *,
        api_key: str | None = None,
        timeout: float = 300.0,
        max_turns: int = 12,
        sampling: dict[str, Any] | None = None,
        logprobs: bool | str | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        retry: RetryPolicy = DEFAULT_RETRY,
        timeout_knob: str | None = None,
    ) -> None:
        self.model = Model(spec, api_key=api_key, timeout=timeout, retry=retry, transport=transport)
        self.spec = self.model.spec
        self.timeout = timeout
        #: the setting a user raises to lengthen ``timeout`` when it is not ``timeout=`` itself
        #: (the console script's ``agent.timeout`` and ``simulate.timeout``); None: that one
        self.timeout_knob = timeout_knob
        self.transport = transport
        self.retry = retry
        self.api_key = self.model.api_key
        self.max_turns = max_turns
        # Its own sampling, recorded on every row; a "model" key never replaces the served
        # model (the spec names it).
        self.sampling = {
            **DEFAULT_SAMPLING,
            **{k: v for k, v in (sampling or {}).items() if k != "model"},
        }
        self.logprobs = logprobs
        self.model_version = self.model.name
        #: recent completions, read by the progress line's early warnings
        self.call_times = CallTimes()
        # timed from the send, after any wait for a slot at the server's adaptive limit
        self.model.observer = self.call_times

    async def aclose(self) -> None:
        """Close the running loop's client (the engine calls it at the end of a run)."""
        await self.model.aclose()

    async def _complete(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        turn: int,
        t0: float,
    ) -> Completion:
        """One model call bounded by ``timeout`` (the spec's limit is per completion, so a
        long rollout of quick turns is never cut). Raises ``CompletionTimeout`` naming the
        limit and the turn, ``BackendError`` for any other failure."""

        def late(detail: str = "") -> CompletionTimeout:
            said = self.model.late(f" turn {turn}", detail)
            if not detail:
                said = CompletionTimeout(
                    f"{said} (the limit is per model completion; the rollout had run "
                    f"{time.monotonic() - t0:.0f} s)",
                    limit_s=self.model.timeout,
                )
            said.turn = turn
            return said

        try:
            return await self.model.complete(
                messages, tools, self.sampling, logprobs=bool(self.logprobs)
            )
        except CompletionTimeout as exc:
            raise late(exc.detail) from exc
        except BackendError as exc:
            if isinstance(exc.__cause__, httpx.ReadTimeout | httpx.WriteTimeout):
                raise late() from exc  # httpx's own read limit fired first: the same limit
            raise

    async def __call__(
        self,
        prompt: str,
        *,
        tools: list[dict[str, Any]],
        system_prompt: str | None,
        world: Any,
        sampling: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Run one rollout. ``sampling`` (the engine's ``simulate(sampling=)``) is ignored:
        a model backend samples and records its own. Raises ``BackendError`` when a model
        call fails for good, ``CompletionTimeout`` when one outlasts ``timeout``."""
        steps: list[dict[str, Any]] = []
        usage = {"input_tokens": 0, "output_tokens": 0}
        ended_by = "agent"
        final_text = ""
        model_seen = self.spec.model
        t0 = time.monotonic()
        ids_used: set[str] = set()
        # Built as the steps grow (each message depends on its step only), so the backend
        # encodes each message once, not the whole conversation again on every turn.
        messages = Transcript(messages_from_steps(system_prompt, prompt, []))
        said = 0  # steps already in messages
        for turn in range(1, self.max_turns + 1):
            messages.extend(step_messages(steps[said:]))
            said = len(steps)
            try:
                done = await self._complete(messages, tools, turn, t0)
            except BackendError as exc:
                if turn == 1 or not context_overflow(exc):
                    raise
                # The conversation outgrew the model's context window: the rollout ends
                # here, cut at a length limit as at the token cap, instead of being lost
                # with the turns it had (a 12-turn rollout on a 2k-4k context does).
                ended_by = "context_full"
                break
            model_seen = done.model or model_seen
            _unique_call_ids(done.tool_calls, turn, ids_used)
            step: dict[str, Any] = {
                "kind": "assistant",
                "content": done.content,
                "tool_calls": done.tool_calls,
                "input_tokens": done.input_tokens,
                "output_tokens": done.output_tokens,
                "truncated": done.truncated,
            }
            if self.logprobs and done.token_logprobs is not None:
                step["logprob"] = float(sum(done.token_logprobs))
                step["n_tokens"] = len(done.token_logprobs)
                if self.logprobs == "tokens":
                    step["token_logprobs"] = done.token_logprobs
            elif self.logprobs:
                # Asked, none came back (llama.cpp on its tool-calling path, Anthropic): the
                # engine counts these turns and warns; a missing logprob is never a 0.
                step["logprobs_missing"] = True
            steps.append(step)
            usage["input_tokens"] += done.input_tokens or 0
            usage["output_tokens"] += done.output_tokens or 0
            if done.tool_calls:
                # aexecute when the world has it: a real server's answer is awaited, not
                # waited for with the loop (and every other rollout's model call) stopped.
                execute = getattr(world, "aexecute", None) or world.execute
                for call in done.tool_calls:
                    result = execute(call["name"], call["arguments"])
                    if inspect.isawaitable(result):
                        result = await result
                    tool_step = dict(result) if isinstance(result, dict) else {"result": result}
                    tool_step.update(
                        kind="tool",
                        tool_call_id=call["id"],
                        name=call["name"],
                        arguments=call["arguments"],
                    )
                    tool_step.setdefault("status", "ok")
                    steps.append(tool_step)
                continue
            final_text = done.content
            if done.truncated:
                ended_by = "truncated"  # cut at the token cap: not the agent's own ending
                break
            # A model-played person answers on this loop (aask_user) when the world has it.
            ask_user = getattr(world, "aask_user", None) or getattr(world, "ask_user", None)
            if final_text.rstrip().endswith("?") and ask_user is not None:
                answer = ask_user(final_text)
                if inspect.isawaitable(answer):
                    answer = await answer
                if answer is None:
                    # The world says why: walked away, or out of turns (avg_turns // 2).
                    ended_by = str(getattr(world, "ended_by", None) or "user_left")
                    break
                steps.append({"kind": "user", "content": answer})
                continue
            break
        else:
            ended_by = "max_turns"
        return {
            "steps": steps,
            "final_text": final_text,
            "model_version": f"{self.spec.provider}:{model_seen}",
            "sampling": {
                "temperature": self.sampling.get("temperature"),
                "max_tokens": self.sampling.get("max_tokens"),
                "model": model_seen,
            },
            "usage": usage,
            "ended_by": ended_by,
        }


def _unique_call_ids(calls: list[dict[str, Any]], turn: int, used: set[str]) -> None:
    """Give every tool call of a rollout its own id, in place. Servers that send none get a
    placeholder per call from the backend, and some (TGI) give every call the same id; a
    repeated id would pair a tool reply with the wrong call in the transcript sent back and
    in the row. An id's first use is kept."""
    for i, call in enumerate(calls):
        cid = str(call.get("id") or "")
        if not cid or cid in used:
            n = 0
            cid = f"call_{turn}_{i}"
            while cid in used:
                n += 1
                cid = f"call_{turn}_{i}_{n}"
            call["id"] = cid
        used.add(cid)
