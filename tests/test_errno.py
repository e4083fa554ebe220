"""The errno behind an HTTP client's failure, wherever it is wrapped."""

from __future__ import annotations

import errno

from zeroclaw._errno import errno_reason, first_errno


class Wrapper(Exception):
    """An HTTP client's own error, with no errno of its own."""


def test_the_first_errno_is_found_through_causes_contexts_and_groups() -> None:
    refused = ConnectionRefusedError(errno.ECONNREFUSED, "refused")
    try:
        try:
            raise ExceptionGroup("happy eyeballs", [ValueError("no"), refused])
        except ExceptionGroup as group:
            raise Wrapper("all attempts failed") from group
    except Wrapper as wrapped:
        assert first_errno(wrapped) == errno.ECONNREFUSED
    assert first_errno(Wrapper("nothing below")) is None
    looped = Wrapper("a cause that loops")
    looped.__context__ = looped
    assert first_errno(looped) is None


def test_the_reason_names_the_error_and_its_symbol() -> None:
    assert errno_reason(errno.ECONNREFUSED) == "Connection refused (ECONNREFUSED)"
    assert errno_reason(errno.EACCES) == "Permission denied (EACCES)"
