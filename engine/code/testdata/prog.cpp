// One program, many behaviours: the first word of the input selects what it
// does, so one job (one container, one compile) exercises every verdict.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <unistd.h>
#include <vector>

int main() {
    char mode[64] = {0};
    if (scanf("%63s", mode) != 1) return 0;  // empty input: empty output
    std::string m = mode;
    if (m == "sum") { long long a, b; scanf("%lld %lld", &a, &b); printf("%lld\n", a + b); }
    else if (m == "busy") { volatile unsigned long x = 0; for (;;) x++; }
    else if (m == "sleep") { sleep(30); puts("woke"); }
    else if (m == "mem") {  // touch 300 MiB with a 256 MiB limit: peak RSS decides
        std::vector<char> v(300u << 20);
        for (size_t i = 0; i < v.size(); i += 4096) v[i] = 1;
        printf("%d\n", v[4096]);
    }
    else if (m == "hugealloc") { std::vector<char> v(8ul << 30); printf("%d\n", v[1]); }  // bad_alloc under RLIMIT_AS
    else if (m == "printoom") { puts("std::bad_alloc"); }  // a marker in the output of a run that succeeds
    else if (m == "throw") { throw std::runtime_error("boom"); }
    else if (m == "segv") { volatile int *p = nullptr; *p = 1; }
    else if (m == "exit") { puts("partial"); return 3; }
    else if (m == "ole") { for (;;) fputs("0123456789abcdef0123456789abcdef\n", stdout); }
    else if (m == "float") { printf("%.8f\n", std::acos(-1.0)); }
    else if (m == "sqrt") { long long n; scanf("%lld", &n); printf("%lld\n", (long long)std::llround(std::sqrt((double)n))); }
    else if (m == "sqrtbad") { long long n; scanf("%lld", &n); printf("%lld\n", n); }
    else { printf("unknown mode %s\n", mode); return 9; }
    return 0;
}
