/* Every address family from 0 to AF_MAX, with every socket type, through one
 * way of asking for a socket, named by the input (seccomp_test.go). It prints
 *   <way> 0..<AF_MAX> open <families that gave a descriptor, or none> refused <errnos>
 * where the errnos are those of the families no socket type opened.
 * Ways: socket, socketpair (the 64-bit calls), socket64 (the family with bit
 * 32 set: the kernel reads an int, a filter comparing 64 bits sees another
 * value), socket32 and socketcall (the i386 calls, made with int 0x80 from
 * this 64-bit program: the kernel serves them as 32-bit syscalls, and the
 * filter sees the i386 architecture). A kernel without i386 syscalls makes
 * int 0x80 fault: then the line says "no i386 syscalls". */
#define _GNU_SOURCE
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <string.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#define I386_SOCKETCALL 102
#define I386_SOCKET 359
#define I386_GETPID 20
#define SOCKETCALL_SOCKET 1

static const int types[] = {SOCK_STREAM, SOCK_DGRAM, SOCK_RAW, SOCK_SEQPACKET, SOCK_RDM};
static unsigned int *low; /* socketcall's argument block, below 4 GiB */

static long i386_call(long nr, long a, long b, long c) {
    long ret;
    __asm__ volatile("int $0x80" : "=a"(ret) : "a"(nr), "b"(a), "c"(b), "d"(c) : "memory", "r8", "r9", "r10", "r11");
    return ret;
}

/* try returns a descriptor (>= 0) or -errno. */
static long try(const char *way, int family, int type) {
    int sv[2];
    long r;
    if (way[6] == 0) { /* "socket" */
        r = socket(family, type, 0);
        return r >= 0 ? r : -errno;
    }
    switch (way[6]) {
    case 'p': /* socketpair */
        if (socketpair(family, type, 0, sv) < 0) return -errno;
        close(sv[1]);
        return sv[0];
    case '6': /* socket64 */
        r = syscall(SYS_socket, (1L << 32) | (unsigned int)family, type, 0);
        return r >= 0 ? r : -errno;
    case '3': /* socket32 */
        return (int)i386_call(I386_SOCKET, family, type, 0);
    default: /* socketcall */
        low[0] = family, low[1] = type, low[2] = 0;
        return (int)i386_call(I386_SOCKETCALL, SOCKETCALL_SOCKET, (long)low, 0);
    }
}

static sigjmp_buf fault;
static void on_fault(int sig) { siglongjmp(fault, sig); }

/* i386_served says whether int 0x80 reaches the kernel's 32-bit table. */
static int i386_served(void) {
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_fault;
    sigaction(SIGSEGV, &sa, &old);
    int ok = 0;
    if (sigsetjmp(fault, 1) == 0) ok = i386_call(I386_GETPID, 0, 0, 0) == getpid();
    sigaction(SIGSEGV, &old, NULL);
    return ok;
}

int main(void) {
    char way[32];
    if (scanf("%31s", way) != 1) return 2;
    printf("%s 0..%d ", way, AF_MAX);
    if (way[6] == '3' || way[6] == 'c') {
        if (!i386_served()) {
            puts("no i386 syscalls");
            return 0;
        }
        low = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_32BIT, -1, 0);
        if (low == MAP_FAILED) return 3;
    }
    char refused[256] = {0};
    int opened = 0;
    fputs("open", stdout);
    for (int family = 0; family <= AF_MAX; family++) {
        int open = 0, errs[sizeof types / sizeof *types], n = 0;
        for (size_t t = 0; t < sizeof types / sizeof *types; t++) {
            long r = try(way, family, types[t]);
            if (r >= 0) {
                open = 1;
                close((int)r);
            } else {
                errs[n++] = (int)-r;
            }
        }
        if (open) printf("%s%d", opened++ ? "," : " ", family);
        for (int k = 0; !open && k < n; k++)
            if (errs[k] > 0 && errs[k] < (int)sizeof refused) refused[errs[k]] = 1;
    }
    if (!opened) fputs(" none", stdout);
    fputs(" refused", stdout);
    for (int e = 0, n = 0; e < (int)sizeof refused; e++)
        if (refused[e]) printf("%s%d", n++ ? "," : " ", e);
    putchar('\n');
    return 0;
}
