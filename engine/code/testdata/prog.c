/* Same modes as prog.cpp (see there), in C: judged as c11 and c17. */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(void) {
    char m[64] = {0};
    if (scanf("%63s", m) != 1) return 0; /* empty input: empty output */
    if (!strcmp(m, "sum")) { long long a, b; scanf("%lld %lld", &a, &b); printf("%lld\n", a + b); }
    else if (!strcmp(m, "busy")) { volatile unsigned long x = 0; for (;;) x++; }
    else if (!strcmp(m, "sleep")) { sleep(30); puts("woke"); }
    else if (!strcmp(m, "mem")) { /* touch 1 MiB blocks until malloc fails: peak RSS is over the limit by then */
        for (int i = 0; i < 300; i++) {
            char *v = malloc((size_t)1 << 20);
            if (!v) return 5;
            memset(v, 1, (size_t)1 << 20);
        }
        puts("1");
    }
    else if (!strcmp(m, "throw")) { abort(); } /* C has no exceptions: abort is the nearest */
    else if (!strcmp(m, "segv")) { volatile int *p = NULL; *p = 1; }
    else if (!strcmp(m, "exit")) { puts("partial"); return 3; }
    else if (!strcmp(m, "ole")) { for (;;) fputs("0123456789abcdef0123456789abcdef\n", stdout); }
    else if (!strcmp(m, "float")) { printf("%.8f\n", acos(-1.0)); }
    else if (!strcmp(m, "sqrt")) { long long n; scanf("%lld", &n); printf("%lld\n", llround(sqrt((double)n))); }
    else if (!strcmp(m, "sqrtbad")) { long long n; scanf("%lld", &n); printf("%lld\n", n); }
    else if (!strcmp(m, "libm")) { double x; scanf("%lf", &x); printf("%.6f\n", lgamma(x) + cbrt(x)); } /* needs -lm */
    else { printf("unknown mode %s\n", m); return 9; }
    return 0;
}
