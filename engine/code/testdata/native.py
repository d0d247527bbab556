# Native memory in CPython (runmemory_test.go). Each mode but "fits" asks for
# up to 4 GiB and prints "survived" if it could not get more: only the
# engine's measurement or the memory cgroup can make it an MLE. Modes:
#   bytearray  bytearrays (malloc), one process
#   mmap       anonymous mmap objects, touched, one process
#   forkmmap   60 MiB of mmap in each of four processes, each under its own
#              RLIMIT_AS: only the run's memory cgroup holds their sum
#   memfd      os.memfd_create and os.write: memory no process maps, in
#              as many memfds as RLIMIT_FSIZE and RLIMIT_NOFILE allow
#   fits       a quarter of the limit (16 MiB of 64): AC after every mode above
import mmap
import os
import sys
import time

CHUNK = 4 << 20
TOTAL = 4 << 30
mode = sys.stdin.read().split()[0]
keep = []
got = 0
try:
    if mode == "bytearray":
        while got < TOTAL:
            keep.append(bytearray(b"\x01" * CHUNK))
            got += CHUNK
    elif mode == "mmap":
        while got < TOTAL:
            m = mmap.mmap(-1, CHUNK)
            m.write(b"\x01" * CHUNK)
            keep.append(m)
            got += CHUNK
    elif mode == "forkmmap":
        for _ in range(4):
            if os.fork() == 0:
                m = mmap.mmap(-1, 60 << 20)
                for off in range(0, 60 << 20, 4096):
                    m[off] = 1
                time.sleep(3600)  # hold it until the supervisor ends the run
                os._exit(0)
        os.wait()  # the first child to end: only a kill ends one
    elif mode == "memfd":
        # Each memfd as large as RLIMIT_FSIZE (the output limit) lets it
        # grow (CPython ignores SIGXFSZ: EFBIG), then another, up to
        # RLIMIT_NOFILE.
        block = b"\x01" * CHUNK
        while got < TOTAL:
            fd, size = os.memfd_create("kece"), 0
            try:
                while got < TOTAL:
                    n = os.write(fd, block)
                    size, got = size + n, got + n
            except OSError:
                if size == 0:
                    break
    elif mode == "fits":
        keep.append(bytearray(b"\x01" * (16 << 20)))
        print("held")
        sys.exit(0)
except (MemoryError, OSError) as e:
    keep = None
    print("stopped:", type(e).__name__, file=sys.stderr)
print("survived with", got >> 20, "MiB")
