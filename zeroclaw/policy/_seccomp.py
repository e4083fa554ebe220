"""No new user namespace (ADR 0043): a process with no capability could otherwise create one
and hold every capability inside it (a raw socket in a network namespace of its own, mounts,
the kernel code only namespace root reaches). A tiny seccomp filter refuses `unshare` and
`clone` with CLONE_NEWUSER (EPERM) and `clone3` (ENOSYS: its flags are behind a pointer the
filter cannot read, and libc falls back to `clone`), and kills a syscall of another ABI
(i386 compat through `int 0x80`, x32): their numbers differ, so `unshare` there passed a
filter that only knew the native one. With `no_inet` (a process with no TCP port to
reach) `socket()` of AF_INET or AF_INET6 and `io_uring_setup` (whose socket op no filter
sees) are EACCES too: Landlock governs TCP only, so UDP went anywhere. Everything else is
allowed.
"""

from __future__ import annotations

import ctypes
import os
import platform
import struct

PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
CLONE_NEWUSER = 0x10000000

# BPF opcodes (linux/bpf_common.h, linux/seccomp.h)
_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JSET_K = 0x45
_JGE_K = 0x35
_RET_K = 0x06
_ALLOW = 0x7FFF0000
_KILL_PROCESS = 0x80000000
_X32_SYSCALL_BIT = 0x40000000
_ERRNO = 0x00050000
_EPERM = 1
_ENOSYS = 38

# (audit arch, unshare, clone, clone3, socket) per machine
_ARCHES = {
    "x86_64": (0xC000003E, 272, 56, 435, 41),
    "aarch64": (0xC00000B7, 97, 220, 435, 198),
}
_IO_URING_SETUP = 425  # the same on every architecture
_AF_INET, _AF_INET6 = 2, 10
_EACCES = 13

_libc = ctypes.CDLL(None, use_errno=True)


def _insn(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def user_namespace_filter(machine: str, *, no_inet: bool = False) -> bytes | None:
    """The BPF program for `machine` (platform.machine()), or None where we have no table."""
    if machine not in _ARCHES:
        return None
    arch, unshare, clone, clone3, socket = _ARCHES[machine]
    inet = (
        [
            _insn(_JEQ_K, 0, 1, _IO_URING_SETUP),
            _insn(_RET_K, 0, 0, _ERRNO | _EACCES),
            _insn(_JEQ_K, 0, 5, socket),
            _insn(_LD_W_ABS, 0, 0, 16),  # the low half of args[0]: the domain
            _insn(_JEQ_K, 2, 0, _AF_INET),
            _insn(_JEQ_K, 1, 0, _AF_INET6),
            _insn(_RET_K, 0, 0, _ALLOW),
            _insn(_RET_K, 0, 0, _ERRNO | _EACCES),
        ]
        if no_inet
        else []
    )
    # x32 shares x86_64's audit arch; its numbers carry a high bit instead
    x32 = (
        [_insn(_JGE_K, 0, 1, _X32_SYSCALL_BIT), _insn(_RET_K, 0, 0, _KILL_PROCESS)]
        if machine == "x86_64"
        else []
    )
    program = [
        _insn(_LD_W_ABS, 0, 0, 4),  # seccomp_data.arch
        _insn(_JEQ_K, 1, 0, arch),
        _insn(_RET_K, 0, 0, _KILL_PROCESS),  # another ABI (i386 compat, arm32)
        _insn(_LD_W_ABS, 0, 0, 0),  # seccomp_data.nr
        *x32,
        *inet,
        _insn(_JEQ_K, 0, 1, clone3),
        _insn(_RET_K, 0, 0, _ERRNO | _ENOSYS),
        _insn(_JEQ_K, 1, 0, unshare),
        _insn(_JEQ_K, 0, 3, clone),
        _insn(_LD_W_ABS, 0, 0, 16),  # the low half of args[0]: the flags
        _insn(_JSET_K, 0, 1, CLONE_NEWUSER),
        _insn(_RET_K, 0, 0, _ERRNO | _EPERM),
        _insn(_RET_K, 0, 0, _ALLOW),
    ]
    return b"".join(program)


def forbid_user_namespaces(*, no_inet: bool = False) -> bool:
    """Install the filter on this process (and all it starts), for good. Needs no_new_privs
    (set by `drop_capabilities`). False where this machine has no table."""
    program = user_namespace_filter(platform.machine(), no_inet=no_inet)
    if program is None:
        return False
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = struct.pack("=HxxxxxxQ", len(program) // 8, ctypes.addressof(buffer))
    fprog_buffer = ctypes.create_string_buffer(fprog, len(fprog))
    mode, zero = ctypes.c_ulong(SECCOMP_MODE_FILTER), ctypes.c_ulong(0)
    if _libc.prctl(PR_SET_SECCOMP, mode, fprog_buffer, zero, zero) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"seccomp: {os.strerror(err)}")
    return True
