"""A Kestrel app run in worker subprocesses by tests/core/test_versions.py (DSN from
$KESTREL_DSN): workflow ``report`` at the code version named by $VERSIONS_APP_VERSION."""

from __future__ import annotations

import os

from kestrel_core import Kestrel

VERSION = os.environ.get("VERSIONS_APP_VERSION", "A")
app = Kestrel()


@app.workflow("report", version=VERSION)
def report(ctx, input):
    return {"ran_under": VERSION}
