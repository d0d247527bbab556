// Communication-task manager (docs/engine.md "Communication tasks"):
// argv <input> <result file> <answer> <N>; descriptor 3+2(k-1) writes to
// process k, 4+2(k-1) reads from it. The input holds N numbers, then N
// words; process k is sent "x_k word_k" and must answer x_k squared. Every
// process is sent its number before any answer is read, so they run at once.
// Exit 0 OK, 1 WA, 2 PE (an answer missing), as testlib's convention.
// An optional word after the N words is the manager's own mode: burn (1.5 s
// of its own CPU before it sends anything, which must not count against the
// processes), silent (sends, then never reads nor ends), crash (reads every
// answer, then aborts), fail (exit 3), probe (followed by "<reversed marker>
// <reversed control> <host workspace>": it looks for the contestant's files
// first, see probe.h, uploaded beside it for this mode).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <unistd.h>
#include <vector>
#if __has_include("probe.h")
#include "probe.h"
#endif

static FILE *tout;

static int verdict(int code, const char *msg) {
    fprintf(tout, "%s\n", msg);
    fclose(tout);
    fprintf(stderr, "%s\n", msg);
    return code;
}

int main(int argc, char **argv) {
    if (argc < 5) return 3;
    FILE *in = fopen(argv[1], "r");
    tout = fopen(argv[2], "w");
    int n = atoi(argv[4]);
    if (!in || !tout || n < 1) return 3;
    std::vector<long> x(n);
    std::vector<FILE *> to(n), from(n);
    for (int k = 0; k < n; k++) {
        if (fscanf(in, "%ld", &x[k]) != 1) return verdict(3, "bad input file");
        to[k] = fdopen(3 + 2 * k, "w");
        from[k] = fdopen(4 + 2 * k, "r");
        if (!to[k] || !from[k]) return verdict(3, "missing descriptor");
    }
    std::vector<std::string> words(n);
    for (int k = 0; k < n; k++) {
        char word[32];
        if (fscanf(in, "%31s", word) != 1) return verdict(3, "bad input file");
        words[k] = word;
    }
    char mode[32] = "";
    if (fscanf(in, "%31s", mode) != 1) mode[0] = 0;
    if (!strcmp(mode, "fail")) return verdict(3, "manager FAIL on purpose");
    if (!strcmp(mode, "burn")) {
        volatile unsigned long spin = 0;
        while (clock() < CLOCKS_PER_SEC * 3 / 2) spin++;
    }
    std::string probed;
    if (!strcmp(mode, "probe")) {
#if __has_include("probe.h")
        static char revMarker[256], revControl[256], host[1024];
        if (fscanf(in, "%255s %255s %1023s", revMarker, revControl, host) != 3) return verdict(3, "bad probe input");
        int code = probeFiles(revMarker, revControl, host, probed);
        if (code != 0) return verdict(code, probed.c_str());
#else
        return verdict(3, "probe mode needs probe.h");
#endif
    }
    for (int k = 0; k < n; k++) {
        fprintf(to[k], "%ld %s\n", x[k], words[k].c_str());
        fflush(to[k]);
    }
    if (!strcmp(mode, "silent"))
        for (;;) pause();
    long sum = 0;
    char msg[128];
    for (int k = 0; k < n; k++) {
        long y;
        if (fscanf(from[k], "%ld", &y) != 1) {
            snprintf(msg, sizeof msg, "process %d gave no answer", k + 1);
            return verdict(2, msg);
        }
        if (y != x[k] * x[k]) {
            snprintf(msg, sizeof msg, "process %d answered %ld for %ld", k + 1, y, x[k]);
            return verdict(1, msg);
        }
        sum += y;
    }
    if (!strcmp(mode, "crash")) abort();
    snprintf(msg, sizeof msg, "ok sum of squares %ld", sum);
    if (!probed.empty()) return verdict(0, (std::string(msg) + " (" + probed + ")").c_str());
    return verdict(0, msg);
}
