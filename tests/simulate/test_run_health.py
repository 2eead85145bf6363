"""What a run says while it runs: progress as rows land (and while none do), early warnings
for slow calls and a one-at-a-time server, a lost rollout's error in plain words."""

from __future__ import annotations

import asyncio
import time

import wai_exp
from wai_exp.simulate.run_health import CallTimes, early_warning, failure_summary, plain_error


def test_progress_counts_rows_as_they_land_not_when_the_round_ends():
    finished: list[float] = []
    seen: list[tuple[float, int]] = []

    async def agent(message):
        await asyncio.sleep(0.02 * (1 + len(finished) % 5))
        finished.append(time.monotonic())
        return "ok"

    data = wai_exp.simulate(
        agent=agent, budget=24, simulator=False,
        advanced={"concurrency": 4, "progress_every_rows": 1},
        progress=lambda info: seen.append((time.monotonic(), info["done"])),
    )  # fmt: skip
    assert len(data.rows) == 24
    # one round holds all 24 (writer_buffer_cap 96): rows showed before its last rollout ended
    first_row_shown = min(t for t, done in seen if done >= 1)
    assert first_row_shown < max(finished)
    assert [d for _, d in seen] == sorted(d for _, d in seen) and seen[-1][1] == 24


def test_the_progress_line_is_redrawn_while_no_row_lands():
    seen: list[int] = []

    def slow(message):
        time.sleep(1.6)
        return "ok"

    wai_exp.simulate(
        agent=slow, budget=1, simulator=False, advanced={"progress_every_s": 0.5},
        progress=lambda info: seen.append(info["done"]),
    )  # fmt: skip
    assert seen.count(0) >= 2 and seen[-1] == 1


def test_calls_close_to_the_timeout_are_warned_about_with_the_fix():
    def slow(message):
        time.sleep(0.6)
        return "ok"

    data = wai_exp.simulate(agent=slow, budget=2, simulator=False, timeout=1.0)
    [w] = [w for w in data.warnings if w.startswith("while it ran:")]
    assert "of the simulate.timeout=1 s limit" in w and "raise simulate.timeout" in w


def test_at_concurrency_one_the_advice_does_not_say_lower_the_concurrency():
    # SmolLM2 at knobs.concurrency=1 was told "or lower knobs.concurrency" on every line.
    slow = CallTimes()
    slow.done(slow.start())
    slow.slowest = 39.0
    for concurrency, says in ((1, False), (4, True)):
        note = early_warning(slow, timeout=40, concurrency=concurrency, knob="agent.timeout")
        assert note and "raise agent.timeout" in note
        assert ("lower knobs.concurrency" in note) is says, note


def test_a_serial_server_is_told_from_one_that_keeps_up():
    def times(durations_and_finish, in_flight):
        t = CallTimes()
        for seconds, finished in durations_and_finish:
            t.calls.append((finished, seconds, in_flight))
        return t

    # one slot, 0.5 s a call, 8 sent at once: they finish 0.5 s apart, waiting up to 4 s
    serial = times([(0.5 * (i + 1), 0.5 * (i + 1)) for i in range(16)], 8)
    note = early_warning(serial, timeout=300, concurrency=8)
    assert note and "one request at a time" in note and "knobs.concurrency=1" in note
    # eight slots: eight calls finish together every 0.5 s
    parallel = times([(0.5, 0.5 * (1 + i // 8) + 0.001 * i) for i in range(16)], 8)
    assert early_warning(parallel, timeout=300, concurrency=8) is None
    # one call at a time sent: nothing to warn about
    assert early_warning(times([(0.5, 0.5 * (i + 1)) for i in range(16)], 1), timeout=300,
                         concurrency=1) is None  # fmt: skip


def test_lost_errors_in_plain_words():
    assert "refused the API key (HTTP 401)" in plain_error(
        {"error_type": "BackendError", "status": 401, "error": "BackendError: HTTP 401 ... sk-x"}
    )
    assert "sk-x" not in plain_error({"error_type": "BackendError", "status": 401, "error": "sk-x"})
    unreachable = plain_error({
        "error_type": "BackendError",
        "error": "BackendError: could not reach the model server: ClientConnectorError: "
                 "Cannot connect to host 127.0.0.1:9",
    })  # fmt: skip
    assert "could not be reached (ClientConnectorError: Cannot connect to host 127.0.0.1:9)" in (
        unreachable
    )
    summary = failure_summary(
        "dead_agent", rows=0,
        lost=[{"error_type": "timeout", "error": "timeout: m did not answer turn 3 within timeout=30 s"}] * 20,
    )  # fmt: skip
    assert summary.startswith("simulate failed: the agent was called off after 20 lost rollouts")
    assert "lost by cause: 20 timeout" in summary and "turn 3 within timeout=30 s" in summary


def test_a_writer_that_gave_up_is_described_by_what_its_cards_were_rejected_for():
    writer = {
        "model": "vllm:w", "waves": 12, "cards": 24, "restarts": 2, "waves_failed": 0,
        "rejected": {"duplicate": 20, "malformed": 4}, "structured_output": "json_object",
    }  # fmt: skip
    text = failure_summary("writer_exhausted", rows=0, lost=[], writer=writer)
    assert text.startswith("simulate failed: the model writer (vllm:w) wrote nothing usable")
    assert "in 12 waves of 24 cards" in text and "after 2 restarts (writer_exhausted)" in text
    # most first, and the fix fits the cause: near copies want a wider temperature band
    assert "20 duplicates of earlier asks; 4 malformed" in text
    assert "knobs.writer_temperature" in text and text.endswith("0 rows landed")


def test_a_fast_agent_in_this_process_is_never_called_a_one_at_a_time_server():
    # Calls of a fraction of a millisecond: the event loop and the GIL take them in turn,
    # which is no server queueing, and knobs.concurrency=1 would only slow the run down.
    def flaky(message):
        if len(message) % 2:
            raise RuntimeError("no answer for this one")
        return "ok"

    data = wai_exp.simulate(agent=flaky, budget=200, simulator=False)
    assert len(data.rows) + len(data.lost) == 200 and data.rows
    assert not any("one request at a time" in w for w in data.warnings), data.warnings
    t = CallTimes()
    for i in range(32):  # 0.1 ms calls, ten sent at once, finishing one after another
        t.calls.append((0.001 * i, 0.0001 * (1 + i % 10), 10))
    assert early_warning(t, timeout=300, concurrency=32) is None


def test_a_request_the_server_rejects_is_summarised_with_the_servers_own_reason():
    from tests.support.scripted_server import scripted_server

    too_long = {"object": "error", "type": "BadRequestError", "code": 400,
                "message": "This model's maximum context length is 2048 tokens. However, you "
                           "requested 2300 tokens. Please reduce the length of the messages."}  # fmt: skip
    with scripted_server(lambda path, headers, body: (400, too_long)) as url:
        data = wai_exp.simulate(agent=f"vllm:m@{url}", simulator=False, budget=2)
    [w] = [w for w in data.warnings if w.startswith("simulate failed")]
    assert "maximum context length is 2048" in w
    # a context overflow is named as one, with the fix (it said "rejected the request")
    assert "outgrew the model's context window (HTTP 400)" in w
    assert "--n_ctx" in w and "--max-model-len" in w and "agent.max_turns" in w


def test_a_context_overflow_names_the_fix_whatever_the_server_calls_it():
    for said in (
        "Requested tokens (4200) exceed context window of 4096",  # llama-cpp-python inside
        "the request exceeds the available context size, try increasing it",  # llama.cpp
        '{"error": {"code": "context_length_exceeded", "message": "too long"}}',  # OpenAI
    ):
        text = plain_error({"error_type": "BackendError", "status": 400,
                            "error": f"BackendError: HTTP 400 from http://h/v1: {said}"})  # fmt: skip
        assert "outgrew the model's context window" in text, said
    other = plain_error({"error_type": "BackendError", "status": 400,
                         "error": "BackendError: HTTP 400 from http://h/v1: bad tool schema"})  # fmt: skip
    assert "rejected the request with HTTP 400 (the server said: bad tool schema)" in other


def test_a_rejection_that_quotes_the_key_back_is_summarised_without_it():
    from wai_exp.domain.secrets import register_secret

    register_secret("sk-live-quoted-0123456789")
    body = '{"error": {"message": "key sk-live-quoted-0123456789 lacks access to model m"}}'
    text = plain_error({"error_type": "BackendError", "status": 404,
                        "error": f"BackendError: HTTP 404 from http://h/v1: {body}"})  # fmt: skip
    assert "sk-live-quoted" not in text
    text = plain_error({"error_type": "BackendError", "status": 422,
                        "error": f"BackendError: HTTP 422 from http://h/v1: {body}"})  # fmt: skip
    assert "lacks access to model m" in text and "sk-live-quoted" not in text


def test_rollouts_lost_on_the_way_are_warned_about_with_the_cause_and_first_error():
    def flaky(message):
        if len(message) % 3 == 0:
            raise RuntimeError("the CRM timed out on this one")
        return "ok"

    data = wai_exp.simulate(agent=flaky, budget=30, simulator=False)
    lost = data.report()["rollouts_lost"]
    assert len(data.rows) + lost == 30 and lost > 0  # a lost rollout keeps its slot
    [w] = [w for w in data.warnings if "rollouts were lost" in w]
    assert w.startswith(f"{lost} of 30 rollouts were lost ({lost} RuntimeError)")
    assert "first error: RuntimeError: the CRM timed out on this one" in w


def test_a_writer_whose_cards_came_back_empty_or_whose_waves_timed_out_gets_its_own_fix():
    # 68 cards left without asks: the model answered, so neither "differ more" (duplicates)
    # nor "check the server" fits; what does is fewer cards per wave or a larger budget.
    writer = {
        "model": "vllm:w", "waves": 20, "cards": 70, "restarts": 2, "waves_failed": 0,
        "rejected": {"missing_asks": 68, "duplicate": 2}, "structured_output": "json_object",
    }  # fmt: skip
    text = failure_summary("writer_exhausted", rows=0, lost=[], writer=writer)
    assert "68 left without asks" in text and "left cards without asks" in text
    assert "knobs.min_cards_per_wave=1" in text and "writer_temperature" not in text
    # waves the server never answered in time: the bound is named, with its value
    writer = {
        "model": "vllm:w", "waves": 4, "cards": 30, "restarts": 0, "waves_failed": 4,
        "waves_timed_out": 4, "gave_up_on": "timeouts", "timeout_s": 300.0, "rejected": {},
        "first_error": "CompletionTimeout: vllm:w did not answer within timeout=300 s",
    }  # fmt: skip
    text = failure_summary("writer_exhausted", rows=0, lost=[], writer=writer)
    assert "gave up after 4 waves timed out (writer_exhausted)" in text
    assert "within simulate.timeout=300 s: raise simulate.timeout" in text
