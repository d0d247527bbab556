// Guess-the-number interactor (testlib's interactor convention, no testlib):
// argv: <input> <result file> [<answer>]. The input is "n secret mode word":
// the program is told "n word" and then guesses; each guess is answered
// "<" (the secret is smaller), ">" (larger) or "=". Exit 0 OK, 1 WA, 2 PE,
// 3 FAIL, 7 points (stderr "points <value>"). Modes test the engine:
// normal, silent (never answers: waits forever), fail (exit 3), burn (uses
// up to 1.5 s of CPU (a busy 1.5 s of wall time) before it starts, which must not count against the program),
// probe (the input goes on with "<reversed marker> <reversed control>
// <host workspace>": before playing, it looks for the contestant's files,
// see probe.h, which is uploaded beside it for this mode).
#include <cstdio>
#include <chrono>
#include <cstring>
#include <string>
#include <unistd.h>
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
    if (argc < 3) return 3;
    FILE *in = fopen(argv[1], "r");
    tout = fopen(argv[2], "w");
    if (!in || !tout) return 3;
    long n, secret;
    char mode[32], word[32];
    if (fscanf(in, "%ld %ld %31s %31s", &n, &secret, mode, word) != 4) return verdict(3, "bad input file");
    if (strcmp(mode, "fail") == 0) return verdict(3, "interactor FAIL on purpose");
    std::string probed;
    if (strcmp(mode, "probe") == 0) {
#if __has_include("probe.h")
        static char revMarker[256], revControl[256], host[1024];
        if (fscanf(in, "%255s %255s %1023s", revMarker, revControl, host) != 3) return verdict(3, "bad probe input");
        int code = probeFiles(revMarker, revControl, host, probed);
        if (code != 0) return verdict(code, probed.c_str());
#else
        return verdict(3, "probe mode needs probe.h");
#endif
    }
    if (strcmp(mode, "burn") == 0) {
        volatile unsigned long x = 0;
        auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(1500);
        while (std::chrono::steady_clock::now() < end) x++;
    }
    printf("%ld %s\n", n, word);
    fflush(stdout);
    for (int k = 1;; k++) {
        long g;
        if (scanf("%ld", &g) != 1) return verdict(2, "unexpected end of the program's output");
        if (strcmp(mode, "silent") == 0) {
            for (;;) pause();
        }
        if (k > 30) return verdict(1, "wrong answer: more than 30 guesses");
        if (g == secret) {
            printf("=\n");
            fflush(stdout);
            char msg[96];
            if (k > 20) {
                snprintf(msg, sizeof msg, "points 0.5 found %ld in %d guesses", secret, k);
                fclose(tout);
                fprintf(stderr, "%s\n", msg);
                return 7;
            }
            snprintf(msg, sizeof msg, "ok found %ld in %d guesses", secret, k);
            if (!probed.empty()) return verdict(0, (std::string(msg) + " (" + probed + ")").c_str());
            return verdict(0, msg);
        }
        printf("%s\n", g > secret ? "<" : ">");
        fflush(stdout);
    }
}
