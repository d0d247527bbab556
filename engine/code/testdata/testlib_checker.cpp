// A testlib-protocol checker for the tests: the contestant's program echoes
// its input line, and the first word says which verdict to give. It checks
// testlib's argument order: argv[1] is the input, argv[3] the answer file.
#include <csignal>
#include <string>
#include "testlib.h"

int main(int argc, char **argv) {
    registerTestlibCmd(argc, argv);
    std::string want = inf.readWord();
    // Before any order check, so the time-out test works under every protocol.
    if (want == "spin") for (volatile unsigned long i = 0;; i++) {}
    std::string tag = ans.readWord();
    if (tag != "ANSWER") quitf(_fail, "argv[3] is not the answer file (read %s)", tag.c_str());
    std::string cmd = ouf.readWord();
    if (cmd != want) quitf(_fail, "argv[1] is not the input (read %s, output says %s)", want.c_str(), cmd.c_str());
    if (cmd == "ok") quitf(_ok, "all good");
    if (cmd == "wa") quitf(_wa, "expected ok, found wa");
    if (cmd == "pe") quitf(_pe, "expected a number");
    if (cmd == "fail") quitf(_fail, "the answer file is inconsistent");
    if (cmd == "pts") {
        double p = std::stod(ouf.readWord());
        quitp(p, "partial answer of %s", cmd.c_str());
    }
    if (cmd == "crash") std::raise(SIGSEGV);
    if (cmd == "exit5") return 5;
    quitf(_wa, "unknown command %s", cmd.c_str());
}
