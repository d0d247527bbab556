# A score-protocol checker for the tests: argv input output answer; prints
# one number on stdout (the points) and a comment on stderr. The contestant's
# program echoes its input line: "score X" prints X, "garbage" prints a word.
import os, signal, sys

_, inp, out, ans = sys.argv
if open(ans).read().split() != ["ANSWER"]:
    print("argv[3] is not the answer file", file=sys.stderr)
    sys.exit(1)
words = open(out).read().split()
if words[0] == "score":
    print(words[1])
    print("scored " + words[1], file=sys.stderr)
elif words[0] == "garbage":
    print("lots")
elif words[0] == "crash":
    os.kill(os.getpid(), signal.SIGSEGV)
else:
    print("0")
