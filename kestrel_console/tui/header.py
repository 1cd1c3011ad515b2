"""What the header says: where the console points, as whom, how often it refreshes, in the
longest form that fits the terminal (at 80 columns the full form would be cut)."""

from __future__ import annotations

from kestrel_core.db import describe_target

# Columns the Header keeps for its icon and margins around the centred "title — sub-title".
HEADER_MARGIN = 18


def header_text(
    dsn: str,
    schema: str,
    operator: str,
    refresh: float,
    *,
    paused: bool = False,
    read_only: bool = False,
    width: int = 200,
    replica: str = "",
) -> tuple[str, str]:
    """(title, sub_title): the first candidate, longest first, whose "title — sub" fits.
    ``replica``: the read replica's lag ('replica lag 0.4 s'), kept in every form."""
    target = describe_target(dsn)
    database = target.rsplit("/", 1)[-1]
    flags = (
        (" · PAUSED" if paused else "") + (" · READ-ONLY" if read_only else "") + (f" · {replica}" if replica else "")
    )
    candidates = [
        (f"Kestrel · {target} · schema {schema}", f"operator {operator} · refresh {refresh:g} s{flags}"),
        (f"Kestrel · {target} · {schema}", f"{operator} · refresh {refresh:g} s{flags}"),
        (f"Kestrel · {database} · {schema}", f"{operator} · {refresh:g} s{flags}"),
        (f"Kestrel · {database}", f"{operator} · {refresh:g} s{flags}"),
    ]
    room = max(20, width - HEADER_MARGIN)
    for title, sub in candidates:
        if len(title) + 3 + len(sub) <= room:
            return title, sub
    return "Kestrel", f"{operator}{flags}"
