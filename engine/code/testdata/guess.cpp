// Guess-the-number contestant (see interactor.cpp); the word the interactor
// sends chooses a behaviour: ok (binary search), linear (1, 2, 3, ...),
// tle (busy loop), idle (waits for input that never comes), flood (writes
// guesses without reading), re (exit 3), peek (tries the other side's files).
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

int main() {
    long n;
    char word[32];
    if (scanf("%ld %31s", &n, word) != 2) return 9;
    if (!strcmp(word, "tle")) {
        volatile unsigned long x = 0;
        for (;;) x++;
    }
    if (!strcmp(word, "idle")) {
        long g;
        return scanf("%ld", &g);
    }
    if (!strcmp(word, "flood")) {
        for (;;) printf("1\n");
    }
    if (!strcmp(word, "re")) return 3;
    if (!strcmp(word, "peek")) {
        const char *paths[] = {"/pipe", "/exp/0", "/in/0", "/cin/0"};
        for (const char *p : paths)
            if (open(p, O_RDONLY) >= 0) return 42;
    }
    long lo = 1, hi = n, step = 1;
    for (long g = 1;;) {
        if (!strcmp(word, "linear")) g = step++;
        else g = (lo + hi) / 2;
        printf("%ld\n", g);
        fflush(stdout);
        char r[4];
        if (scanf("%3s", r) != 1) return 0;
        if (r[0] == '=') return 0;
        if (r[0] == '<') hi = g - 1; else lo = g + 1;
    }
}
