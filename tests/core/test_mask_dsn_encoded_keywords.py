"""Red-team review r44b: DSN passwords printed.

Promise (docs, issue 43/44 masking; kestrel_core/base/masking.py): a DSN's password is never
printed, whatever its spelling. libpq percent-decodes the *keywords* of a URL's query too
(``?pass%77ord=s3cret`` is ``password=s3cret``: ``conninfo_to_dict`` says so). The generous
masker (``mask_dsn``) looks for the literal word ``password=``, and a DSN libpq reads
"ambiguously" (here: a user in the query other than the URL's) is shown through it alone:

1. ``kestrel-console --dsn 'postgresql://u@127.0.0.1:1/db?pass%77ord=s3cret&user=a%20b' status``
   prints ``error: invalid DSN '...pass%77ord=s3cret&user=a%20b'`` (check_dsn's message, the
   DSN being "ambiguous", masked by mask_dsn alone).
"""

from __future__ import annotations

from psycopg.conninfo import conninfo_to_dict

from kestrel_core import DatabaseUnavailable
from kestrel_core.db.connection import check_dsn, describe_target

SECRET = "s3cretPW"
AMBIGUOUS = f"postgresql://u@127.0.0.1:1/db?pass%77ord={SECRET}&user=a%20b"


def test_libpq_reads_the_encoded_keyword_as_the_password() -> None:
    assert conninfo_to_dict(AMBIGUOUS)["password"] == SECRET  # what the test is about


def test_describe_target_never_prints_the_password() -> None:
    assert SECRET not in describe_target(AMBIGUOUS)


def test_an_invalid_dsn_message_never_prints_the_password() -> None:
    try:
        check_dsn(AMBIGUOUS)
    except DatabaseUnavailable as exc:
        assert SECRET not in str(exc)
