/* Memory outside malloc (runmemory_test.go), one source for C and C++. Each
 * mode but "fits" asks for up to 4 GiB and prints "survived" if it could not
 * get more: only the engine's measurement or the memory cgroup can make it an
 * MLE. Modes:
 *   mmap      anonymous maps, touched, in one process (address space and RSS)
 *   forkmmap  60 MiB of touched maps in each of four processes, each under
 *             its own RLIMIT_AS (no one process's RSS is over the limit)
 *   memfd     memfd_create and write(): shared memory no process maps, so in
 *             no RSS and no address space; each memfd as large as
 *             RLIMIT_FSIZE lets it grow, then another, up to RLIMIT_NOFILE
 *   memfdmap  memfd_create, ftruncate, mmap a window, touch it, munmap it:
 *             the same, reached through mappings
 *   sysvshm   System V segments, attached, touched, detached: they outlive
 *             the process that made them (prints "refused <errno>" when
 *             shmget is refused)
 *   fits      a quarter of the limit (16 MiB of 64) through malloc: must be
 *             AC after every mode above, so none of them left memory behind */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/wait.h>
#include <unistd.h>

#define CHUNK ((size_t)4 << 20)
#define TOTAL ((size_t)4 << 30)

static size_t fill_anon(size_t total) {
    size_t done = 0;
    for (; done < total; done += CHUNK) {
        void *p = mmap(NULL, CHUNK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) break;
        memset(p, 1, CHUNK);
    }
    return done;
}

/* fill_memfd fills memfds, each as far as RLIMIT_FSIZE (the output limit)
 * lets a file grow, then opens another, until RLIMIT_NOFILE or memory ends. */
static size_t fill_memfd(int mapped) {
    char *buf = (char *)malloc(CHUNK);
    if (!buf) return 0;
    memset(buf, 1, CHUNK);
    size_t done = 0;
    for (;;) {
        int fd = memfd_create("kece", 0);
        if (fd < 0) return done;
        size_t size = 0;
        for (;;) {
            size_t n = CHUNK;
            if (!mapped) {
                ssize_t w = write(fd, buf, CHUNK);
                if (w <= 0) break;
                n = (size_t)w;
            } else {
                if (ftruncate(fd, (off_t)(size + CHUNK)) != 0) break;
                void *p = mmap(NULL, CHUNK, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)size);
                if (p == MAP_FAILED) break;
                memset(p, 1, CHUNK);
                munmap(p, CHUNK);
            }
            size += n;
            done += n;
            if (done >= TOTAL) return done;
        }
        if (size == 0) return done;
    }
}

static size_t fill_shm(void) {
    size_t done = 0;
    for (; done < TOTAL; done += CHUNK) {
        int id = shmget(IPC_PRIVATE, CHUNK, IPC_CREAT | 0600);
        if (id < 0) {
            if (done == 0) {
                printf("refused %d\n", errno);
                exit(0);
            }
            break;
        }
        void *p = shmat(id, NULL, 0);
        if (p == (void *)-1) break;
        memset(p, 1, CHUNK);
        shmdt(p);
    }
    return done;
}

int main(void) {
    char mode[32];
    size_t got = 0;
    if (scanf("%31s", mode) != 1) return 2;
    signal(SIGXFSZ, SIG_IGN); /* a file past RLIMIT_FSIZE: EFBIG, not a kill */
    if (strcmp(mode, "mmap") == 0) {
        got = fill_anon(TOTAL);
    } else if (strcmp(mode, "forkmmap") == 0) {
        for (int i = 0; i < 4; i++) {
            if (fork() == 0) {
                fill_anon((size_t)60 << 20);
                pause(); /* hold it until the supervisor ends the run */
                _exit(0);
            }
        }
        wait(NULL); /* the first child to end: only a kill ends one */
    } else if (strcmp(mode, "memfd") == 0) {
        got = fill_memfd(0);
    } else if (strcmp(mode, "memfdmap") == 0) {
        got = fill_memfd(1);
    } else if (strcmp(mode, "sysvshm") == 0) {
        got = fill_shm();
    } else if (strcmp(mode, "fits") == 0) {
        char *p = (char *)malloc((size_t)16 << 20);
        if (!p) return 3;
        memset(p, 1, (size_t)16 << 20);
        puts("held");
        return 0;
    }
    printf("survived with %zu MiB\n", got >> 20);
    return 0;
}
