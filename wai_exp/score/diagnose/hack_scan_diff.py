"""What did the policy learn? The reward-hack scan before training against the scan after.

``hack_scan`` names what a grouped update *would* learn from a reward. After the update has
run, the same scan on fresh rollouts scored by the same reward says what changed: a feature
that separates reward above the noise floor after training and did not before is what the
update moved toward (``gained``); one that dropped below the floor is what it moved away from
(``lost``). ``learned`` is the one line to read: the top gained feature and whether it is one
of the ``endorsed`` features the reward is supposed to track.

A side whose scan is ``degenerate`` (every feature tied at |rho| 1 on a pool too uniform to
separate them) or that never reached a noise floor (no mixed asks, too few rows) cannot be
read: then no feature can be said to have been gained and no hack is claimed, but the rows are
still listed so the shift stays visible.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from wai_exp.score.diagnose.hack_scan import MIN_DISTINCT_PER_ASK, hack_scan

SIDES = ("before", "after")


def _unreadable_reason(scan: dict[str, Any]) -> str | None:
    """Why a scan cannot be compared (None when it can): degenerate, or no floor measured."""
    regime = scan.get("regime")
    if regime == "degenerate":
        d = scan.get("distinct_per_ask")
        tied = scan.get("collinear") or []
        return (
            f"degenerate pool: {'n/a' if d is None else f'{d:g}'} distinct rollouts per mixed ask "
            f"(median, below {MIN_DISTINCT_PER_ASK}) with {len(tied)} features exactly collinear "
            f"with reward ({', '.join(tied[:5])}), so every one of them sits above the floor at "
            f"|rho| 1 and none can be told apart"
        )
    if scan.get("tau") is None:
        # The scan stopped before measuring a floor; its last warning says where and why.
        warns = scan.get("warnings") or []
        why = warns[-1] if warns else "no noise floor was measured"
        return f"no noise floor (regime {regime}): {why}"
    return None


def _judges(rows: Sequence[dict[str, Any]]) -> set[tuple[str, str]]:
    """The (judge_name, judge_version) pairs the rows were scored by, where they say so."""
    out: set[tuple[str, str]] = set()
    for r in rows:
        name = r.get("judge_name")
        lineage = r.get("lineage") or {}
        version = lineage.get("judge_version") if isinstance(lineage, dict) else None
        if name is not None or version is not None:
            out.add((str(name), str(version)))
    return out


def _row(
    name: str,
    b: dict[str, Any] | None,
    a: dict[str, Any] | None,
    endorsed: bool,
) -> dict[str, Any]:
    """One feature's both-sides entry; a side that did not scan the feature reads None."""
    rb = None if b is None else b["rho"]
    ra = None if a is None else a["rho"]
    entry: dict[str, Any] = {
        "name": name,
        "rho_before": rb,
        "rho_after": ra,
        "shift": None if rb is None or ra is None else round(ra - rb, 6),
        "pooled_before": None if b is None else b.get("pooled"),
        "pooled_after": None if a is None else a.get("pooled"),
        "above_before": bool(b and b["above_floor"]),
        "above_after": bool(a and a["above_floor"]),
        "endorsed": endorsed,
    }
    missing = [side for side, f in zip(SIDES, (b, a), strict=True) if f is None]
    if missing:
        # Absent from a scan: it did not vary within any mixed ask there, or it fell past
        # top_k / top_features, or that scan stopped before ranking. Not a zero either way.
        entry["note"] = (
            f"not scanned {' or '.join(missing)}: did not vary within a mixed ask, fell past "
            f"top_k/top_features, or the scan stopped before ranking"
        )
    return entry


def hack_scan_diff(
    before: Sequence[dict[str, Any]],
    after: Sequence[dict[str, Any]],
    endorsed: Sequence[str] = (),
    top: int = 10,
    **scan_kwargs: Any,
) -> dict[str, Any]:
    """What the policy learned: ``hack_scan`` of ``before`` against ``hack_scan`` of ``after``.

    Both scans run with the same ``endorsed`` and ``scan_kwargs`` (``seed``, ``n_perm``,
    ``alpha``, ``reward``, ``features`` ... exactly as ``hack_scan`` takes them). Unless
    ``top_features`` is passed, both scans list every feature (``top_features=None``) so a
    feature ranked low on one side still shows its correlation there.

    Returns a dict with:

    * ``before`` / ``after``: the two full ``hack_scan`` reports;
    * ``readable``: ``{"before": bool, "after": bool}`` and ``unreadable``: ``{side: why}`` for
      a side that is ``degenerate`` or never measured a noise floor;
    * ``gained``: features above the floor after and not before, in the after scan's ranking;
      ``lost``: the reverse, in the before scan's ranking. Each entry carries ``name``,
      ``rho_before``, ``rho_after`` (within-ask Spearman; None where that side did not scan the
      feature, with a ``note``), ``shift`` (after - before, None unless both are measured),
      ``pooled_before``/``pooled_after``, ``above_before``/``above_after`` and ``endorsed``;
    * ``moved``: the ``top`` features measured on both sides with the largest |shift|;
    * ``learned``: the one line to read; ``learned_feature`` (the top gained feature, None when
      nothing was gained or a side is unreadable), ``learned_endorsed`` (bool, None without an
      endorsed list or a learned feature) and ``hack`` (True when the learned feature is not
      endorsed or the reward pays against it, False when it is endorsed and paid for, None when
      nothing can be claimed);
    * ``warnings``: one line each.

    Never raises on data; raises ``ValueError`` for ``top < 1`` and for whatever ``hack_scan``
    rejects in ``scan_kwargs`` (``TypeError`` for a keyword it does not take).
    """
    if top < 1:
        raise ValueError(f"hack_scan_diff needs top >= 1 (got top={top!r}); the default is 10.")
    endorsed = tuple(str(e) for e in endorsed)
    kwargs = dict(scan_kwargs)
    kwargs.setdefault("top_features", None)
    scans = {
        "before": hack_scan(before, endorsed=endorsed, **kwargs),
        "after": hack_scan(after, endorsed=endorsed, **kwargs),
    }
    warnings = _scan_warnings(kwargs["top_features"], before, after)
    unreadable = {s: why for s in SIDES if (why := _unreadable_reason(scans[s])) is not None}
    gained, lost, moved = _feature_changes(scans, top)

    report: dict[str, Any] = {
        "endorsed": list(endorsed),
        "before": scans["before"],
        "after": scans["after"],
        "readable": {s: s not in unreadable for s in SIDES},
        "unreadable": unreadable,
        "gained": gained,
        "lost": lost,
        "moved": moved,
        "learned": "",
        "learned_feature": None,
        "learned_endorsed": None,
        "hack": None,
        "warnings": warnings,
    }

    report["learned"] = _learned(report, scans, unreadable, gained, lost, endorsed)
    return report


def _scan_warnings(
    top_features: int | None, before: Sequence[dict[str, Any]], after: Sequence[dict[str, Any]]
) -> list[str]:
    """What limits the comparison before it starts: a capped ranking, two judges."""
    warnings: list[str] = []
    if top_features is not None:
        warnings.append(
            f"top_features={top_features} caps each side's ranking: a feature past it "
            f"reads as not scanned on that side"
        )
    jb, ja = _judges(before), _judges(after)
    if jb and ja and jb != ja:
        warnings.append(
            f"the sides were scored by different judges (before {sorted(jb)}, after {sorted(ja)}): "
            f"a shift may be the judge's, not the policy's; re-grade both with one judge"
        )
    return warnings


def _feature_changes(
    scans: Mapping[str, dict[str, Any]], top: int
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """Features that cleared the floor after (gained) or stopped clearing it (lost), each in
    its side's rank order, and the ``top`` largest |shifts| measured on both sides."""
    by_side = {s: {f["name"]: f for f in scans[s]["features"]} for s in SIDES}
    rank_of = {s: {f["name"]: i for i, f in enumerate(scans[s]["features"])} for s in SIDES}
    names = sorted(set(by_side["before"]) | set(by_side["after"]))
    entries = {
        nm: _row(
            nm,
            by_side["before"].get(nm),
            by_side["after"].get(nm),
            # The scans agree on endorsement (same list, same substring rule); take either.
            bool((by_side["after"].get(nm) or by_side["before"][nm])["endorsed"]),
        )
        for nm in names
    }
    gained = sorted(
        (e for e in entries.values() if e["above_after"] and not e["above_before"]),
        key=lambda e: rank_of["after"][e["name"]],
    )
    lost = sorted(
        (e for e in entries.values() if e["above_before"] and not e["above_after"]),
        key=lambda e: rank_of["before"][e["name"]],
    )
    moved = sorted(
        (dict(e) for e in entries.values() if e["shift"] is not None),
        key=lambda e: (-abs(e["shift"]), e["name"]),
    )[:top]
    return gained, lost, moved


def _learned(
    report: dict[str, Any],
    scans: Mapping[str, dict[str, Any]],
    unreadable: Mapping[str, str],
    gained: list[dict[str, Any]],
    lost: list[dict[str, Any]],
    endorsed: tuple[str, ...],
) -> str:
    """The one line to read; sets ``learned_feature``, ``learned_endorsed`` and ``hack``."""
    if unreadable:
        sides = " and ".join(unreadable)
        whys = "; ".join(f"{s}: {why}" for s, why in unreadable.items())
        return (
            f"cannot say what was learned: the {sides} scan could not be read ({whys}). "
            f"No feature can be said to have gained the floor and no hack is claimed; the shifts "
            f"below are listed for inspection only"
        )
    if not gained:
        line = (
            f"nothing new clears the noise floor after training (tau {scans['before']['tau']:.3f} "
            f"before, {scans['after']['tau']:.3f} after)"
        )
        if lost:
            line += f"; it moved away from {lost[0]['name']}"
        return line
    g = gained[0]
    report["learned_feature"] = g["name"]
    rho_b = "not scanned" if g["rho_before"] is None else f"{g['rho_before']:+.3f}"
    change = f"rho {rho_b} -> {g['rho_after']:+.3f}, floor tau={scans['after']['tau']:.3f}"
    if not endorsed:
        return (
            f"learned {g['name']} ({change}); nothing is endorsed, so it cannot be called "
            f"training signal or a hack: pass endorsed=[...]"
        )
    report["learned_endorsed"] = g["endorsed"]
    report["hack"] = not (g["endorsed"] and g["rho_after"] > 0)
    if g["endorsed"] and g["rho_after"] > 0:
        return (
            f"learned {g['name']} ({change}), which is endorsed: the update moved toward what "
            f"the reward should track"
        )
    if g["endorsed"]:
        return (
            f"learned {g['name']} ({change}), which is endorsed but the reward now pays against "
            f"it: fix the judge before training further"
        )
    return (
        f"learned {g['name']} ({change}), which is not endorsed (endorsed: "
        f"{', '.join(endorsed)}): a shortcut the reward pays for; fix the judge before "
        f"training further"
    )


def _fmt(v: float | None) -> str:
    return "n/a" if v is None else f"{v:+.3f}"


def format_hack_scan_diff(report: dict[str, Any]) -> str:
    """The block a person reads: what was learned, then each side's regime and floor, then the
    gained, lost and moved features with both correlations, then the warnings."""
    lines = [f"hack scan diff: {report.get('learned', '')}"]
    for side in SIDES:
        scan = report.get(side) or {}
        tau = scan.get("tau")
        lines.append(
            f"  {side:<6} regime={scan.get('regime')}, "
            f"floor {'not measured' if tau is None else f'tau={tau:.3f}'}, "
            f"{scan.get('n_rows', 0)} rows, {scan.get('asks_mixed', 0)} mixed asks"
            + ("" if side not in (report.get("unreadable") or {}) else "  (unreadable)")
        )
    header = f"    {'feature':<34} {'before':>8} {'after':>8} {'shift':>8}  endorsed"
    for title, key in (
        ("gained (above the floor after, not before)", "gained"),
        ("lost (above the floor before, not after)", "lost"),
        ("moved (largest shifts either way)", "moved"),
    ):
        rows = report.get(key) or []
        if not rows:
            lines.append(f"  {title}: none")
            continue
        lines.append(f"  {title}:")
        lines.append(header)
        for e in rows:
            lines.append(
                f"    {e['name']:<34} {_fmt(e['rho_before']):>8} {_fmt(e['rho_after']):>8} "
                f"{_fmt(e['shift']):>8}  {'yes' if e['endorsed'] else ''}"
            )
    listed = [e for key in ("gained", "lost", "moved") for e in report.get(key) or []]
    if any(e.get("note") for e in listed):
        lines.append(
            "  n/a: not scanned on that side (did not vary within a mixed ask, fell past "
            "top_k/top_features, or the scan stopped before ranking)"
        )
    for w in report.get("warnings") or []:
        lines.append(f"  ! {w}")
    return "\n".join(lines)
