// Native memory outside malloc (runmemory_test.go). Modes: mmap (one
// process, held by RLIMIT_AS), forkmmap (four processes, each under its own
// RLIMIT_AS: only the run's memory cgroup holds their sum).
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <new>
#include <string>

static void fill(size_t total) {
    const size_t chunk = 4 << 20;
    for (size_t done = 0; done < total; done += chunk) {
        void* p = mmap(nullptr, chunk, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) throw std::bad_alloc();
        memset(p, 1, chunk);
    }
}

int main() {
    std::string mode;
    std::cin >> mode;
    if (mode == "mmap") {
        fill(size_t(4) << 30);
    } else {
        for (int i = 0; i < 4; i++) {
            if (fork() == 0) {
                fill(size_t(60) << 20);
                pause();  // hold it until the supervisor ends the run
                _exit(0);
            }
        }
        wait(nullptr);  // the first child to end: only a kill ends one
    }
    std::puts("survived");
}
