# Guess-the-number contestant (see interactor.cpp and guess.cpp): the word
# the interactor sends chooses the behaviour.
import os
import sys

n, word = sys.stdin.readline().split()
n = int(n)
if word == "tle":
    x = 0
    while True:
        x += 1
if word == "idle":
    sys.stdin.readline()
    sys.exit(0)
if word == "flood":
    while True:
        sys.stdout.write("1\n")
if word == "re":
    sys.exit(3)
if word == "peek":
    for p in ["/pipe", "/exp/0", "/in/0", "/cin/0"]:
        try:
            os.close(os.open(p, os.O_RDONLY))
            sys.exit(42)
        except OSError:
            pass
lo, hi, step = 1, n, 1
while True:
    if word == "linear":
        g, step = step, step + 1
    else:
        g = (lo + hi) // 2
    print(g, flush=True)
    r = sys.stdin.readline().strip()
    if r in ("=", ""):
        break
    if r == "<":
        hi = g - 1
    else:
        lo = g + 1
