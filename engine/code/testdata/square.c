/* Communication-task process in C (see manager.cpp and square.cpp): argv[1]
   is its index; it reads "x word" and answers x squared. The word chooses
   the behaviour, as in square.cpp. */
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 2) return 9;
    long x;
    char w[32];
    if (scanf("%ld %31s", &x, w) != 2) return 9;
    volatile unsigned long spin = 0;
    if (!strcmp(w, "tle"))
        for (;;) spin++;
    if (!strcmp(w, "burn"))
        while (clock() < CLOCKS_PER_SEC * 6 / 10) spin++;
    if (!strcmp(w, "fork")) {
        pid_t c = fork();
        if (c == 0)
            for (;;) spin++;
        waitpid(c, NULL, 0);
    }
    if (!strcmp(w, "idle")) return scanf("%ld", &x);
    if (!strcmp(w, "re")) return 3;
    if (!strcmp(w, "flood"))
        for (;;) printf("1\n");
    printf("%ld\n", x * x + (strcmp(w, "wrong") == 0));
    return 0;
}
