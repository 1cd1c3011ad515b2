"""The smoke runs share the server with the rest of the suite: their databases go with the
suite's own when the run ends, and they force no checkpoint (``bench.databases.sharing_the_server``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bench.databases import sharing_the_server
from tests.conftest import drop_at_the_end


@pytest.fixture(autouse=True)
def beside_the_other_tests() -> Iterator[None]:
    with sharing_the_server(drop_at_the_end):
        yield
