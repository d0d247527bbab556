// Special judge: accepts when the user's number squared equals the input's n.
// argv: input expected user_output. n == 0 makes the checker crash.
#include <cstdio>
#include <cstring>
int main(int argc, char **argv) {
    if (argc != 4) return 3;
    FILE *in = fopen(argv[1], "r"), *exp = fopen(argv[2], "r"), *out = fopen(argv[3], "r");
    if (!in || !exp || !out) { fprintf(stderr, "cannot open files\n"); return 3; }
    char mode[32]; long long n, k;
    if (fscanf(in, "%31s %lld", mode, &n) != 2) return 3;
    if (n == 0) { volatile int *p = nullptr; *p = 1; }
    if (fscanf(out, "%lld", &k) != 1) { fprintf(stderr, "no number\n"); return 1; }
    if (k * k != n) { fprintf(stderr, "%lld^2 != %lld\n", k, n); return 1; }
    fprintf(stderr, "ok\n");
    return 0;
}
