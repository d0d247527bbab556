// Communication-task process (see manager.cpp): argv[1] is its index; it
// reads "x word" and answers x squared. Words: ok, wrong (x*x+1), tle (busy
// loop), burn (0.6 s of CPU, then answers), fork (a child busy-loops and the
// process waits for it), idle (reads again: deadlock), re (exit 3), flood
// (writes "1" lines without ever reading again).
#include <ctime>
#include <cstdio>
#include <cstring>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 2) return 9;
    long x;
    char w[32];
    if (scanf("%ld %31s", &x, w) != 2) return 9;
    volatile unsigned long spin = 0;
    if (!strcmp(w, "tle"))
        for (;;) spin++;
    if (!strcmp(w, "burn")) {
        while (clock() < CLOCKS_PER_SEC * 6 / 10) spin++;
    }
    if (!strcmp(w, "fork")) {
        pid_t c = fork();
        if (c == 0)
            for (;;) spin++;
        waitpid(c, nullptr, 0);
    }
    if (!strcmp(w, "idle")) return scanf("%ld", &x);
    if (!strcmp(w, "re")) return 3;
    if (!strcmp(w, "flood"))
        for (;;) printf("1\n");
    printf("%ld\n", x * x + (strcmp(w, "wrong") == 0));
    return 0;
}
