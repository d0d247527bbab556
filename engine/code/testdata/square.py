# Communication-task process (see manager.cpp and square.cpp).
import os
import sys
import time

k = int(sys.argv[1])
x, w = sys.stdin.readline().split()
x = int(x)
if w == "tle":
    while True:
        pass
if w == "burn":
    while time.process_time() < 0.6:
        pass
if w == "fork":
    pid = os.fork()
    if pid == 0:
        while True:
            pass
    os.waitpid(pid, 0)
if w == "idle":
    sys.stdin.readline()
    sys.exit(0)
if w == "re":
    sys.exit(3)
if w == "flood":
    while True:
        sys.stdout.write("1\n")
print(x * x + (1 if w == "wrong" else 0), flush=True)
