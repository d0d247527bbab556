# CPU burner for the timing calibration (see burn.cpp): input
# "self <limit_ms> <percent>"; spins until time.process_time() (the CPU time
# of this process, CLOCK_PROCESS_CPUTIME_ID) reaches percent% of limit_ms,
# then prints it in microseconds.
import sys
import time

mode, limit_ms, pct = sys.stdin.read().split()
if mode != "self":
    sys.exit(6)
target = int(limit_ms) * float(pct) / 100.0 / 1000.0
while time.process_time() < target:
    pass
print(int(time.process_time() * 1e6))
