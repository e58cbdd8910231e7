"""The report stage: ``verdicts.json`` and the sweep's files -> ``report.md``, ``report.json``, PNG plots.

Pipeline position: the last box, after the judge (:mod:`gates.judge`), joined to it by ``verdicts.json``
only: this package imports no stage, just :mod:`contracts`. :mod:`report.model` arranges the report as
data, :mod:`report.markdown` writes it as text (and the terminal's summary), :mod:`report.html` as one
self-contained page, :mod:`report.plots` draws it, :mod:`report.build` reads the sweep directory and
writes the files.
"""

from report.build import Built, build_report, main, write_report
from report.model import ReportModel

__all__ = ["Built", "ReportModel", "build_report", "main", "write_report"]
