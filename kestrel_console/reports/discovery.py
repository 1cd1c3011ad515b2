"""Finding reports: the folder shipped with the package (package data), then the user's folders
(``--queries``, ``$KESTREL_QUERIES``), the first user folder winning over later ones."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from importlib import resources
from pathlib import Path

from .model import REPORT_SUFFIX, SHIPPED_PACKAGE_DIR, Report, ReportError, ReportNotFound
from .parse import load_report


def shipped_dir() -> Path | None:
    """The folder of reports shipped with Kestrel: in the wheel, else the repo's ``queries/``."""
    try:
        packaged = resources.files("kestrel_console") / SHIPPED_PACKAGE_DIR
        if packaged.is_dir():
            return Path(str(packaged))
    except (ModuleNotFoundError, TypeError):  # pragma: no cover - unusual loaders
        pass
    repo = Path(__file__).resolve().parents[2] / "queries"
    return repo if repo.is_dir() else None


def _report_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.glob(f"*{REPORT_SUFFIX}") if p.is_file())


def discover(extra_dirs: Sequence[Path] = (), *, broken: list[ReportError] | None = None) -> dict[str, Report]:
    """Every report by name, user folders first (earlier wins), then the shipped ones.

    A malformed file raises ReportError, unless ``broken`` is a list: then the error is
    appended to it and the name stays taken (a broken user report does not silently fall back
    to the shipped one of the same name). A user folder that does not exist is an error.
    """
    candidates: dict[str, list[tuple[Path, bool]]] = {}
    for folder in extra_dirs:
        folder = Path(folder).expanduser()
        if not folder.is_dir():
            raise ReportError(
                f"reports folder {folder} does not exist or is not a folder (given with --queries or $KESTREL_QUERIES)"
            )
        for path in _report_files(folder):
            candidates.setdefault(path.stem, []).append((path, False))
    shipped = shipped_dir()
    if shipped is not None:
        for path in _report_files(shipped):
            candidates.setdefault(path.stem, []).append((path, True))

    reports: dict[str, Report] = {}
    for name in sorted(candidates):
        (path, is_shipped), *hidden = candidates[name]
        try:
            report = load_report(path, shipped=is_shipped)
        except ReportError as exc:
            if broken is None:
                raise
            broken.append(exc)
            continue
        if hidden:
            report = replace(report, overrides=tuple(p for p, _ in hidden))
        reports[name] = report
    return reports


def find_report(name: str, extra_dirs: Sequence[Path] = ()) -> Report:
    """The report called ``name`` (ReportNotFound lists the available ones)."""
    reports = discover(extra_dirs)
    if name in reports:
        return reports[name]
    available = ", ".join(reports) or "none"
    raise ReportNotFound(f"no report named {name!r}; available: {available}\nList them with: kestrel-console report")


# ---------------------------------------------------------------------------------------------
