// Communication-task manager (docs/engine.md "Communication tasks"):
// argv <input> <result file> <answer> <N>; descriptor 3+2(k-1) writes to
// process k, 4+2(k-1) reads from it. The input holds N numbers, then N
// words; process k is sent "x_k word_k" and must answer x_k squared. Every
// process is sent its number before any answer is read, so they run at once.
// Exit 0 OK, 1 WA, 2 PE (an answer missing), as testlib's convention.
#include <cstdio>
#include <cstdlib>
#include <vector>

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
    for (int k = 0; k < n; k++) {
        char word[32];
        if (fscanf(in, "%31s", word) != 1) return verdict(3, "bad input file");
        fprintf(to[k], "%ld %s\n", x[k], word);
        fflush(to[k]);
    }
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
    snprintf(msg, sizeof msg, "ok sum of squares %ld", sum);
    return verdict(0, msg);
}
