# Same modes as prog.cpp (see there).
import math, os, signal, sys, time

words = sys.stdin.read().split()
if not words:
    sys.exit(0)
m = words[0]
if m == "sum":
    print(int(words[1]) + int(words[2]))
elif m == "busy":
    x = 0
    while True:
        x += 1
elif m == "sleep":
    time.sleep(30)
    print("woke")
elif m == "mem":
    keep = []
    while True:
        keep.append(bytearray(16 << 20))
elif m == "hugealloc":
    keep = bytearray(8 << 30)  # MemoryError under RLIMIT_AS
    print(len(keep))
elif m == "printoom":
    print("MemoryError")
    print("MemoryError", file=sys.stderr)
elif m == "throw":
    raise RuntimeError("boom")
elif m == "segv":
    import ctypes
    ctypes.string_at(0)
elif m == "exit":
    print("partial")
    sys.exit(3)
elif m == "ole":
    while True:
        sys.stdout.write("0123456789abcdef0123456789abcdef\n")
elif m == "float":
    print("%.8f" % math.pi)
elif m == "sqrt":
    print(round(math.sqrt(int(words[1]))))
elif m == "sqrtbad":
    print(int(words[1]))
else:
    print("unknown mode", m)
    sys.exit(9)
