# Native memory in CPython (runmemory_test.go). Modes: bytearray (one
# process, held by RLIMIT_AS), forkmmap (four processes, each under its own
# RLIMIT_AS: only the run's memory cgroup holds their sum).
import mmap
import os
import sys
import time

mode = sys.stdin.read().split()[0]
if mode == "bytearray":
    keep = []
    for _ in range(256):
        keep.append(bytearray(b"\x01" * (16 << 20)))
else:
    for _ in range(4):
        if os.fork() == 0:
            m = mmap.mmap(-1, 60 << 20)
            for off in range(0, 60 << 20, 4096):
                m[off] = 1
            time.sleep(3600)  # hold it until the supervisor ends the run
            os._exit(0)
    os.wait()  # the first child to end: only a kill ends one
print("survived")
