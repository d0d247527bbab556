/* IPC objects that outlive the process that made them (seccomp_test.go):
 * System V shared memory, message queues and semaphores, and POSIX message
 * queues. The way is named by the input; it prints
 *   <way> created           (the object is removed again at once)
 *   <way> refused <errno>
 * Ways: shmget, msgget, semget, mq_open (the 64-bit calls), shmget32 (the
 * i386 shmget) and ipc32 (the i386 ipc() multiplexer asking for a shared
 * memory segment), both made with int 0x80 from this 64-bit program. A
 * kernel without i386 syscalls makes int 0x80 fault: then the line says
 * "no i386 syscalls". */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <mqueue.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/msg.h>
#include <sys/sem.h>
#include <sys/shm.h>
#include <sys/syscall.h>
#include <unistd.h>

#define I386_GETPID 20
#define I386_IPC 117
#define I386_SHMGET 395
#define IPC_CALL_SHMGET 23

static long i386_call(long nr, long a, long b, long c, long d) {
    long ret;
    __asm__ volatile("int $0x80" : "=a"(ret) : "a"(nr), "b"(a), "c"(b), "d"(c), "S"(d) : "memory", "r8", "r9", "r10", "r11");
    return ret;
}

static sigjmp_buf fault;
static void on_fault(int sig) { siglongjmp(fault, sig); }

static int i386_served(void) {
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_fault;
    sigaction(SIGSEGV, &sa, &old);
    int ok = 0;
    if (sigsetjmp(fault, 1) == 0) ok = i386_call(I386_GETPID, 0, 0, 0, 0) == getpid();
    sigaction(SIGSEGV, &old, NULL);
    return ok;
}

static void report(const char *way, long r, int err) {
    if (r < 0) {
        printf("%s refused %d\n", way, err);
        return;
    }
    printf("%s created\n", way);
}

int main(void) {
    char way[32];
    long r;
    if (scanf("%31s", way) != 1) return 2;
    if (strcmp(way, "shmget") == 0) {
        r = shmget(IPC_PRIVATE, 1 << 20, IPC_CREAT | 0600);
        report(way, r, errno);
        if (r >= 0) shmctl((int)r, IPC_RMID, NULL);
    } else if (strcmp(way, "msgget") == 0) {
        r = msgget(IPC_PRIVATE, IPC_CREAT | 0600);
        report(way, r, errno);
        if (r >= 0) msgctl((int)r, IPC_RMID, NULL);
    } else if (strcmp(way, "semget") == 0) {
        r = semget(IPC_PRIVATE, 1, IPC_CREAT | 0600);
        report(way, r, errno);
        if (r >= 0) semctl((int)r, 0, IPC_RMID);
    } else if (strcmp(way, "mq_open") == 0) {
        r = syscall(SYS_mq_open, "kece", O_CREAT | O_RDWR, 0600, NULL);
        report(way, r, errno);
        if (r >= 0) syscall(SYS_mq_unlink, "kece");
    } else if (!i386_served()) {
        printf("%s no i386 syscalls\n", way);
    } else {
        if (strcmp(way, "shmget32") == 0)
            r = i386_call(I386_SHMGET, IPC_PRIVATE, 1 << 20, IPC_CREAT | 0600, 0);
        else
            r = i386_call(I386_IPC, IPC_CALL_SHMGET, IPC_PRIVATE, 1 << 20, IPC_CREAT | 0600);
        r = (int)r;
        report(way, r, (int)-r);
        if (r >= 0) shmctl((int)r, IPC_RMID, NULL);
    }
    return 0;
}
