# Escape and abuse attempts in Python, the same modes as abuse.cpp (see
# there): the first word of the input selects one; it prints "blocked" when
# the sandbox held, or BREACH lines saying what it managed to do.
import ctypes
import errno
import os
import signal
import socket
import sys
import threading
import time

breaches = 0


def breach(what):
    global breaches
    print("BREACH", what)
    breaches += 1


def done():
    if not breaches:
        print("blocked")
    sys.stdout.flush()


def spin():
    while True:
        pass


def attempt(what, f):
    """Run f; reaching the end of it is a breach."""
    try:
        f()
    except OSError:
        return
    breach(what)


words = sys.stdin.read().split()
mode = words[0] if words else ""

if mode == "forkbomb":  # catches fork's EAGAIN and keeps going, as a hostile one would
    while True:
        try:
            os.fork()
        except OSError:
            pass
elif mode == "threadbomb":
    while True:
        try:
            threading.Thread(target=spin, daemon=True).start()
        except RuntimeError:
            spin()
elif mode == "socket":
    attempt("AF_INET socket created", lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM).connect(("1.1.1.1", 53)))
    attempt("AF_INET6 socket created", lambda: socket.socket(socket.AF_INET6, socket.SOCK_DGRAM))
    attempt("netlink socket created", lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW))
    attempt("packet socket created", lambda: socket.socket(socket.AF_PACKET, socket.SOCK_RAW))
    done()
elif mode == "readexp":  # the input names where the expected output might be
    for path in words[1:]:
        try:
            with open(path) as f:
                got = f.read(256)
        except OSError:
            continue
        if got:  # (its own, still empty stdout file is readable)
            sys.stdout.write(got)
            sys.exit(0)
    print("nothing")
elif mode == "writeout":
    for p in ["/box/x", "/box/main.py", "/etc/x", "/x", "/in/x", "/out/x", "/kece/x", "/kece/init",
              "/dev/x", "/dev/shm/x", "/proc/x", "/sys/x", "/var/tmp/x", "/usr/bin/x", "/usr/lib/python3/x"]:
        attempt(p, lambda p=p: open(p, "w").close())
    attempt("mkdir /box/d", lambda: os.mkdir("/box/d"))
    try:
        open("/tmp/ok", "w").close()  # the one writable place
    except OSError:
        breach("cannot write /tmp")
    done()
elif mode == "replaceout":
    me = os.readlink("/proc/self/fd/1")
    attempt("unlinked stdout file", lambda: os.unlink(me))
    attempt("symlinked stdout path", lambda: os.symlink("/etc/passwd", me))
    attempt("fifo at stdout path", lambda: os.mkfifo(me))
    attempt("symlink in /out", lambda: os.symlink("/etc/passwd", me + ".x"))
    attempt("fifo in /out", lambda: os.mkfifo(me + ".x"))
    attempt("chmod stdout", lambda: os.fchmod(1, 0o777))
    attempt("chown stdout", lambda: os.fchown(1, os.getuid(), os.getgid()))
    done()
elif mode == "proc":
    def supervisor_channel():
        with open("/proc/1/fd/1", "w") as f:
            f.write('{"id":1,"exit_code":0}\n')
    attempt("opened supervisor channel", supervisor_channel)
    attempt("read /proc/1/environ", lambda: open("/proc/1/environ", "rb").read())
    attempt("opened /proc/1/mem", lambda: open("/proc/1/mem", "r+b"))
    attempt("listed /proc/1/cwd", lambda: os.listdir("/proc/1/cwd"))
    attempt("sysrq", lambda: open("/proc/sysrq-trigger", "w"))
    attempt("cgroup limit writable", lambda: open("/sys/fs/cgroup/memory/memory.limit_in_bytes", "w"))
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.ptrace(16, 1, None, None) == 0:  # PTRACE_ATTACH
        breach("ptrace attached to PID 1")
    done()
elif mode == "killsup":
    attempt("signalled PID 1", lambda: os.kill(1, signal.SIGKILL))
    attempt("signalled PID 1 with TERM", lambda: os.kill(1, signal.SIGTERM))
    attempt("stopped PID 1", lambda: os.kill(1, signal.SIGSTOP))
    try:
        os.kill(-1, signal.SIGKILL)  # reaches nothing: no sibling, never PID 1 or ourselves
    except OSError:
        pass
    done()
elif mode == "forge":  # forged statistics, then a busy loop: must be TLE
    forged = '{"id":1,"cpu_us":1,"wall_us":1,"maxrss_kb":1,"exit_code":0,"signal":0}\n'
    for _ in range(100):
        sys.stdout.write(forged)
        sys.stderr.write(forged)
    sys.stdout.flush()
    spin()
elif mode == "stderr":  # 64 MiB of stderr, then the right answer
    chunk = b"E" * (1 << 16)
    for _ in range(1024):
        os.write(2, chunk)
    done()
elif mode == "sparse":  # a 10 GB sparse file: the file size limit refuses it
    try:
        with open("/tmp/sparse", "wb") as f:
            f.seek(10 << 30)
            f.write(b"x")
            f.flush()
        breach("wrote at 10 GB")
    except OSError as e:
        if e.errno != errno.EFBIG:
            breach("unexpected error %s" % e)
    done()
elif mode == "oomfork":  # more than the container's memory, spread over processes
    r, w = os.pipe()
    kids = []
    for _ in range(8):
        pid = os.fork()
        if pid == 0:
            try:
                b = bytearray(200 << 20)
                for i in range(0, len(b), 4096):
                    b[i] = 1
                os.write(w, b"r")
            except MemoryError:
                os._exit(1)
            while True:
                time.sleep(1)
        kids.append(pid)
    os.close(w)
    os.set_blocking(r, False)
    got, died = 0, False
    while got < 8 and not died:
        try:
            got += len(os.read(r, 8))
        except BlockingIOError:
            pass
        if os.waitpid(-1, os.WNOHANG)[0] > 0:
            died = True
        time.sleep(0.01)
    for k in kids:
        try:
            os.kill(k, signal.SIGKILL)
        except OSError:
            pass
    if not died:
        breach("8 x 200 MiB fit in the container")
    done()
elif mode == "membomb":  # one process grows until a memory limit stops it
    keep = []
    while True:
        keep.append(bytearray(16 << 20))
elif mode == "nofile":
    fds = []
    try:
        while len(fds) < 100000:
            fds.append(os.open("/dev/null", os.O_RDONLY))
    except OSError:
        pass
    if len(fds) >= 1024:
        breach("opened 1024+ files")
    done()
elif mode == "daemon":  # a detached child that outlives the program
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            spin()
        os._exit(0)
    done()
elif mode == "leftover":  # nothing of an earlier case still runs
    me = os.getpid()
    for p in os.listdir("/proc"):
        if p.isdigit() and int(p) not in (1, me):
            try:
                with open("/proc/%s/cmdline" % p, "rb") as f:
                    breach("process %s still runs: %r" % (p, f.read(80)))
            except OSError:
                pass
    done()
elif mode == "tmpstate":  # nothing survives in /tmp from an earlier case
    if os.path.exists("/tmp/ok") or os.path.exists("/tmp/sparse"):
        breach("found files of an earlier case")
    done()
elif mode == "sleep":  # sleeps past the wall limit: TLE on the wall clock
    time.sleep(3600)
elif mode == "ids":  # an unprivileged uid, no capabilities, no_new_privs, seccomp
    if os.getuid() == 0 or os.geteuid() == 0:
        breach("running as root")
    with open("/proc/self/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            v = v.strip()
            if k in ("CapEff", "CapPrm") and v != "0000000000000000":
                breach(line.strip())
            if k == "NoNewPrivs" and v != "1":
                breach("no_new_privs unset")
            if k == "Seccomp" and v != "2":
                breach("no seccomp filter")
    done()
else:
    print("unknown mode", mode)
