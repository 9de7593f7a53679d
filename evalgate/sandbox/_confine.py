#!/usr/bin/env -S python3 -I -S
"""``confine CMD [ARG...]``: run CMD where it cannot reach the process that started it.

This file runs *inside* a sandbox (stdlib only), mounted read-only at ``/opt/evalgate/confine``
and named by ``$CONFINE`` in a task check's environment. A check runs the agent's programs
through it (``$CONFINE sh backup.sh``): the agent's code and the check are the same uid, and a
dumpable check (any ``sh``, ``cmp``, ``python3`` it runs) could otherwise be patched through
``/proc/PID/mem`` or ptrace by the program it judges, e.g. ``exit_group(0)`` written at the
address where the check resumes.

How: a Landlock domain (Linux ≥ 5.13). A process in a domain may ptrace, or open
``/proc/PID/mem``, ``/proc/PID/fd``…, only of processes in the same domain or one nested in it,
so nothing the check runs outside it is reachable; with Landlock ABI ≥ 6 it cannot signal them
either. Files stay as they were (the one handled right, execute, is granted beneath ``/``).
``no_new_privs`` is set as Landlock requires. Where Landlock is missing this fails closed (exit
125, a message on stderr): the check then fails visibly rather than judging unprotected.
"""

import ctypes
import os
import struct
import sys

_SYS_CREATE, _SYS_ADD_RULE, _SYS_RESTRICT = 444, 445, 446  # the same on x86-64 and arm64
_CREATE_VERSION = 1
_RULE_PATH_BENEATH = 1
_ACCESS_FS_EXECUTE = 1
_SCOPE_SIGNAL = 2  # ABI 6
_PR_SET_NO_NEW_PRIVS = 38


def _fail(why):
    sys.stderr.write(f"evalgate confine: cannot confine the program ({why})\n")
    sys.exit(125)


def confine():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    abi = libc.syscall(_SYS_CREATE, None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_VERSION))
    if abi < 1:
        _fail(f"no Landlock in this kernel: {os.strerror(ctypes.get_errno())}")
    if abi >= 6:
        attr = struct.pack("=QQQ", _ACCESS_FS_EXECUTE, 0, _SCOPE_SIGNAL)
    elif abi >= 4:
        attr = struct.pack("=QQ", _ACCESS_FS_EXECUTE, 0)
    else:
        attr = struct.pack("=Q", _ACCESS_FS_EXECUTE)
    ruleset = libc.syscall(_SYS_CREATE, attr, ctypes.c_size_t(len(attr)), ctypes.c_uint32(0))
    if ruleset < 0:
        _fail(f"landlock_create_ruleset: {os.strerror(ctypes.get_errno())}")
    root = os.open("/", os.O_PATH | os.O_DIRECTORY)
    rule = struct.pack("=Qi", _ACCESS_FS_EXECUTE, root)
    if libc.syscall(_SYS_ADD_RULE, ctypes.c_int(ruleset), _RULE_PATH_BENEATH, rule, 0) != 0:
        _fail(f"landlock_add_rule: {os.strerror(ctypes.get_errno())}")
    os.close(root)
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        _fail(f"no_new_privs: {os.strerror(ctypes.get_errno())}")
    if libc.syscall(_SYS_RESTRICT, ctypes.c_int(ruleset), 0) != 0:
        _fail(f"landlock_restrict_self: {os.strerror(ctypes.get_errno())}")
    os.close(ruleset)


if __name__ == "__main__":
    argv = sys.argv[1:]
    if argv[:1] == ["--"]:  # ``python3 -c CODE -- CMD``: the -- keeps CMD's options its own
        argv = argv[1:]
    if not argv:
        _fail("usage: confine CMD [ARG...]")
    confine()
    try:
        os.execvp(argv[0], argv)
    except OSError as exc:
        sys.stderr.write(f"{argv[0]}: {exc.strerror}\n")
        sys.exit(127)
