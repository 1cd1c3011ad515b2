"""`kestrel-console --dsn BAD status`: exit 1, one clear message, no password (issue 9)."""

from __future__ import annotations

import pytest

from tests.cli.script import console

SECRET = "Sx9zq"


@pytest.mark.parametrize("dsn", [
    f"postgresql://bob:{SECRET}%zz@127.0.0.1:5432/app",            # bad percent-escape
    f"postgresql://bob:{SECRET} {SECRET}@127.0.0.1:5432/app",      # a space
    f"postgresql://bob:{SECRET}@{SECRET}@127.0.0.1:5432/app",      # an '@'
    f"host=127.0.0.1 port=5432 password='{SECRET} user=bob",        # unterminated quote
    f"host=127.0.0.1 port=5432 password=x {SECRET} user=bob",       # an unquoted space
    f"postgresql://bob@127.0.0.1:5432/app?password={SECRET}%zz",   # query form
])
def test_a_malformed_dsn_is_refused_without_its_password(dsn: str) -> None:
    for args in (("status",), ("sql", "SELECT 1"), ("migrate",)):
        done = console(*args, dsn=dsn)
        assert done.returncode == 1, (args, done.stderr)
        assert SECRET not in done.stderr + done.stdout, (args, done.stderr)
        assert "invalid DSN" in done.stderr and "Traceback" not in done.stderr


def test_the_same_from_the_environment() -> None:
    done = console("list", env={"KESTREL_DSN": f"postgresql://bob:{SECRET}%zz@127.0.0.1/app"})
    assert done.returncode == 1 and SECRET not in done.stderr and "invalid DSN" in done.stderr
