"""Runs a command where the kernel keyring's system calls (add_key, request_key, keyctl) fail
with EPERM, as in a container whose seccomp profile blocks them. With no D-Bus session bus
either, no keychain is left for the sync token.

usage: no_keyring.py COMMAND [ARGS...]   (Linux on x86_64)
"""
import ctypes, os, platform, struct, sys

assert sys.platform == "linux" and platform.machine() == "x86_64", "x86_64 Linux only"

PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2
RET_ALLOW, RET_ERRNO_EPERM = 0x7FFF0000, 0x00050000 | 1
LD_W_ABS, JEQ_K, RET_K = 0x20, 0x15, 0x06
AUDIT_ARCH_X86_64 = 0xC000003E
BLOCKED = [248, 249, 250]  # add_key, request_key, keyctl


def insn(code, k, jt=0, jf=0):
    return struct.pack("HBBI", code, jt, jf, k)


# seccomp_data: the syscall number at offset 0, the architecture at offset 4.
prog = [insn(LD_W_ABS, 4), insn(JEQ_K, AUDIT_ARCH_X86_64, 1, 0), insn(RET_K, RET_ALLOW), insn(LD_W_ABS, 0)]
for i, nr in enumerate(BLOCKED):
    prog.append(insn(JEQ_K, nr, len(BLOCKED) - i, 0))
prog += [insn(RET_K, RET_ALLOW), insn(RET_K, RET_ERRNO_EPERM)]


class SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_char_p)]


code = b"".join(prog)
fprog = SockFprog(len(prog), code)
libc = ctypes.CDLL(None, use_errno=True)
if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
    sys.exit(f"prctl(NO_NEW_PRIVS): {os.strerror(ctypes.get_errno())}")
if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
    sys.exit(f"prctl(SECCOMP): {os.strerror(ctypes.get_errno())}")
os.execvp(sys.argv[1], sys.argv[1:])
