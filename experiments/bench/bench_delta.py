"""Benchmarks for delta_report and decontaminate (run via ``python experiments/bench/run.py delta``)."""

from __future__ import annotations

import time

import numpy as np


def _templated_prompts(n: int, rng: np.random.Generator, prefix: str) -> list[str]:
    # Template-written asks: a shared boilerplate sentence (what makes any-n-gram useless)
    # plus a situation-specific body drawn from a 5,000-word vocabulary.
    vocab = np.array([f"{prefix}{i}" for i in range(5000)])
    openers = [
        "hello there i need some help with my account today if you can",
        "hi i am writing because something went wrong with my last order",
        "good morning could you please look into the following problem for me",
    ]
    out = []
    for i in range(n):
        body = " ".join(rng.choice(vocab, int(rng.integers(20, 45))))
        out.append(f"{openers[i % 3]} {body}")
    return out


def bench_decontaminate_20k() -> dict:
    from wai_exp.score.select.decontaminate import decontaminate

    rng = np.random.default_rng(0)
    eval_prompts = _templated_prompts(2000, rng, "w")
    train = _templated_prompts(20_000, rng, "w")
    # 1% of the training rows are lightly edited copies of eval prompts
    for i in range(0, 20_000, 100):
        train[i] = "ok so " + eval_prompts[(i // 100) % 2000]
    rows = [{"prompt": p, "scenario_id": f"t{i}"} for i, p in enumerate(train)]
    against = [
        {"prompt": p, "scenario_id": f"e{i}", "answer": f"answer {i}"}
        for i, p in enumerate(eval_prompts)
    ]
    t0, c0 = time.perf_counter(), time.process_time()
    _, rep = decontaminate(rows, against)
    dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    assert rep["n_near"] >= 200, rep["n_near"]
    return {
        "name": "decontaminate 20,000 rows vs 2,000 eval prompts",
        "value": dt,
        "cpu_s": cpu,
        "unit": "s",
        "target": 10.0,
        "better": "lower",
    }


def _arm(n_tasks: int, k: int, p: float, n_markers: int, seed: int) -> list[dict]:
    rng = np.random.default_rng(seed)
    rates = np.clip(p + 0.2 * rng.standard_normal(n_tasks), 0, 1)
    reward = rng.random((n_tasks, k)) < rates[:, None]
    marks = rng.random((n_tasks, k, n_markers)) < 0.5
    names = [f"marker_{j}" for j in range(n_markers)]
    return [
        {
            "scenario_id": f"task{t}",
            "reward": float(reward[t, i]),
            "final_text": "done",
            "markers": dict(zip(names, marks[t, i].astype(float).tolist(), strict=True)),
        }
        for t in range(n_tasks)
        for i in range(k)
    ]


def bench_delta_report_2000x10() -> dict:
    """delta_report on 2,000 paired tasks x (pass@1 + 10 markers) at k=8, 16,000 rows a side.

    ``value`` is the best wall time of 5 calls (the target is on it); ``cpu_s`` the best
    process CPU time, which neighbours' load on a shared 2-core machine inflates far less
    (BLAS threads spinning would show up there, not in wall time). Both medians too.
    """
    from wai_exp.score.stats.delta import delta_report

    before = _arm(2000, 8, 0.5, 10, 1)
    after = _arm(2000, 8, 0.55, 10, 2)
    delta_report(before[:80], after[:80])  # warm imports (scipy) outside the timing
    walls, cpus = [], []
    for _ in range(5):
        t0, c0 = time.perf_counter(), time.process_time()
        rep = delta_report(before, after)
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    assert rep["n_paired_tasks"] == 2000 and len(rep["metrics"]) == 11
    return {
        "name": "delta_report 2,000 paired tasks x 10 markers, k=8",
        "value": min(walls),
        "wall_s_best": round(min(walls), 4),
        "wall_s_median": round(float(np.median(walls)), 4),
        "cpu_s": round(min(cpus), 4),
        "cpu_s_median": round(float(np.median(cpus)), 4),
        "unit": "s",
        "target": 0.5,
        "better": "lower",
    }
