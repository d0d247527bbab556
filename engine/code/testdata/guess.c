/* Guess-the-number contestant in C (see interactor.cpp and guess.cpp): the
   word the interactor sends chooses the behaviour. */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(void) {
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
        for (int i = 0; i < 4; i++)
            if (open(paths[i], O_RDONLY) >= 0) return 42;
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
