// CPU burner for the timing calibration (package timing). Input:
// "<mode> <limit_ms> <percent>". It spins until the CPU time it measures
// itself reaches percent% of limit_ms, then prints that CPU time in
// microseconds. Modes:
//   self     one thread burns; CLOCK_PROCESS_CPUTIME_ID of this process
//   threads  two threads burn; the process clock sums them
//   child    a forked child burns; the parent waits and adds the child's
//            rusage (RUSAGE_CHILDREN) to its own clock: the judged tree
#include <cstdio>
#include <cstring>
#include <ctime>
#include <pthread.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

static long long cpu_us() {
    timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec * 1000000LL + ts.tv_nsec / 1000;
}

static long long target_us;

static void *spin(void *) {
    while (cpu_us() < target_us) {
    }
    return nullptr;
}

static long long tv_us(const timeval &t) { return t.tv_sec * 1000000LL + t.tv_usec; }

int main() {
    char mode[16];
    long long limit_ms;
    double pct;
    if (scanf("%15s %lld %lf", mode, &limit_ms, &pct) != 3) return 2;
    target_us = (long long)(limit_ms * 1000.0 * pct / 100.0);
    if (!strcmp(mode, "self")) {
        spin(nullptr);
        printf("%lld\n", cpu_us());
    } else if (!strcmp(mode, "threads")) {
        pthread_t t;
        if (pthread_create(&t, nullptr, spin, nullptr) != 0) return 3;
        spin(nullptr);
        pthread_join(t, nullptr);
        printf("%lld\n", cpu_us());
    } else if (!strcmp(mode, "child")) {
        target_us -= cpu_us();  // what the parent used so far counts too
        pid_t p = fork();
        if (p < 0) return 4;
        if (p == 0) {
            spin(nullptr);  // the child's clock starts at zero
            _exit(0);
        }
        int st;
        if (waitpid(p, &st, 0) != p || !WIFEXITED(st)) return 5;
        rusage ch;
        getrusage(RUSAGE_CHILDREN, &ch);
        printf("%lld\n", cpu_us() + tv_us(ch.ru_utime) + tv_us(ch.ru_stime));
    } else {
        return 6;
    }
    return 0;
}
