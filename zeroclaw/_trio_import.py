"""Import trio without the `/sbin/ldconfig -p` it runs on import (ADR 0067).

trio names its worker threads with pthread_setname_np, which it looks up once, when
`trio._core._thread_cache` is imported, through `ctypes.util.find_library("pthread")`; on
Linux that runs `/sbin/ldconfig -p` in a subprocess and searches its output. That was a
fork and an exec in the daemon and in the zygote on every start, before either had done
anything of its own.

On glibc the answer is known without asking: the soname of its pthread library is
`libpthread.so.0` (a stub since glibc 2.34, whose pthread functions moved into libc and
are found through it), which is what ldconfig's cache names and what the dynamic loader
opens by its own search, cache or not. So while trio is imported, and only then,
`find_library("pthread")` answers that; any other name, and any other C library (musl,
where trio falls back to libc itself), is asked as before. Nothing is patched outside
that import, and nothing in site-packages.
"""

from __future__ import annotations

import os
import sys

GLIBC_PTHREAD_SONAME = "libpthread.so.0"


def glibc_pthread() -> str | None:
    """The soname of the C library's pthread library when it is glibc's NPTL, else None."""
    try:
        version = os.confstr("CS_GNU_LIBPTHREAD_VERSION")
    except (ValueError, OSError):  # not glibc: the name is unknown to confstr
        return None
    return GLIBC_PTHREAD_SONAME if version and version.startswith("NPTL") else None


def import_trio() -> None:
    """Import trio (once per process) without running ldconfig where the answer is known.
    Call it before anything else imports trio; after, it does nothing."""
    if "trio" in sys.modules:
        return
    known = glibc_pthread()
    if known is None:
        import trio  # asks ldconfig, as trio always did

        return
    import ctypes.util

    ask = ctypes.util.find_library

    def find_library(name: str) -> str | None:
        return known if name == "pthread" else ask(name)

    ctypes.util.find_library = find_library
    try:
        import trio  # noqa: F401
    finally:
        ctypes.util.find_library = ask
