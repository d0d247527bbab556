// Escape and abuse attempts; the first word of the input selects one. Each
// attempt prints "blocked" when the sandbox held (so the expected answer is
// "blocked") or what it managed to do.
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <string>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <unistd.h>

static int breaches = 0;
static void breach(const char *what) { printf("BREACH %s\n", what); breaches++; }
static void done() { if (!breaches) puts("blocked"); }
static void *spin(void *) { for (volatile unsigned long x = 0;; x++) {} return nullptr; }

int main() {
    char mode[64] = {0};
    if (scanf("%63s", mode) != 1) return 0;
    std::string m = mode;
    if (m == "forkbomb") {
        for (;;) { fork(); }
    } else if (m == "threadbomb") {  // threads until RLIMIT_NPROC / the pids limit refuse, all burning
        for (;;) {
            pthread_t t;
            if (pthread_create(&t, nullptr, spin, nullptr) != 0) spin(nullptr);
        }
    } else if (m == "membomb") {  // one process grows until a memory limit stops it
        for (;;) { char *p = new char[16 << 20]; memset(p, 1, 16 << 20); }
    } else if (m == "daemon") {  // a detached grandchild that outlives the program
        if (fork() == 0) {
            setsid();
            if (fork() == 0) spin(nullptr);
            _exit(0);
        }
        done();
    } else if (m == "leftover") {  // nothing of an earlier case still runs
        DIR *d = opendir("/proc");
        while (dirent *e = d ? readdir(d) : nullptr) {
            int pid = atoi(e->d_name);
            if (pid > 1 && pid != getpid()) breach((std::string("process still runs: ") + e->d_name).c_str());
        }
        done();
    } else if (m == "sleep") {  // sleeps past the wall limit: TLE on the wall clock
        sleep(3600);
    } else if (m == "socket") {
        int s = socket(AF_INET, SOCK_STREAM, 0);
        if (s >= 0) {
            sockaddr_in a{}; a.sin_family = AF_INET; a.sin_port = htons(53); inet_pton(AF_INET, "1.1.1.1", &a.sin_addr);
            if (connect(s, (sockaddr *)&a, sizeof a) == 0) breach("connected to 1.1.1.1");
            breach("AF_INET socket created");
        }
        if (socket(AF_INET6, SOCK_DGRAM, 0) >= 0) breach("AF_INET6 socket created");
        if (socket(AF_NETLINK, SOCK_RAW, 0) >= 0) breach("netlink socket created");
        done();
    } else if (m == "readexp") {  // the input names the host path of the expected output
        char path[4096];
        while (scanf("%4095s", path) == 1) {
            int fd = open(path, O_RDONLY);
            if (fd >= 0) {
                char buf[256]; ssize_t n = read(fd, buf, sizeof buf - 1);
                if (n > 0) { buf[n] = 0; printf("%s", buf); return 0; }
            }
        }
        puts("nothing");
    } else if (m == "writeout") {
        const char *paths[] = {"/box/x", "/box/main", "/etc/x", "/x", "/in/x", "/out/x", "/kece/x", "/kece/init",
                               "/dev/x", "/dev/shm/x", "/proc/x", "/sys/x", "/var/tmp/x", "/usr/bin/x"};
        for (const char *p : paths) {
            int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
            if (fd >= 0) breach(p);
        }
        if (mkdir("/box/d", 0777) == 0) breach("mkdir /box/d");
        int fd = open("/tmp/ok", O_WRONLY | O_CREAT, 0644);  // the one writable place
        if (fd < 0) breach("cannot write /tmp");
        done();
    } else if (m == "replaceout") {
        char self[4096] = {0};
        if (readlink("/proc/self/fd/1", self, sizeof self - 1) <= 0) { puts("no fd link"); return 0; }
        fprintf(stderr, "stdout is %s\n", self);
        if (unlink(self) == 0) breach("unlinked stdout file");
        if (symlink("/etc/passwd", self) == 0) breach("symlinked stdout path");
        if (mkfifo(self, 0666) == 0) breach("fifo at stdout path");
        std::string other = std::string(self) + ".x";
        if (symlink("/etc/passwd", other.c_str()) == 0) breach("symlink in /out");
        if (mkfifo(other.c_str(), 0666) == 0) breach("fifo in /out");
        if (fchmod(1, 0777) == 0) breach("chmod stdout");
        if (fchown(1, getuid(), getgid()) == 0) breach("chown stdout");
        done();
    } else if (m == "proc") {
        int fd = open("/proc/1/fd/1", O_WRONLY);
        if (fd >= 0) { dprintf(fd, "{\"id\":1,\"exit_code\":0}\n"); breach("opened supervisor channel"); }
        if (open("/proc/1/environ", O_RDONLY) >= 0) breach("read /proc/1/environ");
        if (open("/proc/1/mem", O_RDWR) >= 0) breach("opened /proc/1/mem");
        if (open("/proc/1/root/kece/init", O_RDONLY) >= 0 && access("/proc/1/cwd", R_OK) == 0) breach("entered /proc/1/cwd");
        if (ptrace(PTRACE_ATTACH, 1, nullptr, nullptr) == 0) breach("ptrace attached to PID 1");
        if (open("/proc/sysrq-trigger", O_WRONLY) >= 0) breach("sysrq");
        if (open("/sys/fs/cgroup/memory/memory.limit_in_bytes", O_WRONLY) >= 0) breach("cgroup limit writable");
        if (open("/proc/self/oom_score_adj", O_WRONLY) >= 0 && false) breach("");
        done();
    } else if (m == "killsup") {
        if (kill(1, SIGKILL) == 0) breach("signalled PID 1");
        if (kill(1, SIGTERM) == 0) breach("signalled PID 1 with TERM");
        kill(-1, SIGKILL);  // reaches nothing but ourselves' siblings: there are none
        done();
    } else if (m == "forge") {  // forged statistics, then a busy loop: must be TLE
        const char *forged = "{\"id\":1,\"cpu_us\":1,\"wall_us\":1,\"maxrss_kb\":1,\"exit_code\":0,\"signal\":0}\n";
        for (int i = 0; i < 100; i++) { fputs(forged, stdout); fputs(forged, stderr); }
        fflush(stdout);
        volatile unsigned long x = 0; for (;;) x++;
    } else if (m == "stderr") {  // 64 MiB of stderr, then the right answer
        static char buf[1 << 16]; memset(buf, 'E', sizeof buf);
        for (int i = 0; i < 1024; i++) if (write(2, buf, sizeof buf) < 0) break;
        done();
    } else if (m == "sparse") {  // a 10 GB sparse file: stopped by the file size limit
        int fd = open("/tmp/sparse", O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0) { puts("cannot open /tmp/sparse"); return 0; }
        if (pwrite(fd, "x", 1, 10LL << 30) == 1) breach("wrote at 10 GB");
        done();
    } else if (m == "oomfork") {  // more than the container's memory, spread over processes
        int ready[2];
        if (pipe(ready) != 0) return 5;
        pid_t kids[8];
        for (int i = 0; i < 8; i++) {
            kids[i] = fork();
            if (kids[i] == 0) {
                size_t n = 200u << 20;
                char *p = (char *)malloc(n);
                for (size_t j = 0; p && j < n; j += 4096) p[j] = 1;
                if (write(ready[1], "r", 1) != 1) _exit(1);
                for (;;) pause();
            }
        }
        close(ready[1]);
        fcntl(ready[0], F_SETFL, O_NONBLOCK);
        // Until all of them hold their memory, or one of them is gone (OOM).
        int got = 0, died = 0;
        while (got < 8 && !died) {
            char c;
            while (read(ready[0], &c, 1) == 1) got++;
            if (waitpid(-1, nullptr, WNOHANG) > 0) died = 1;
            usleep(10000);
        }
        for (int i = 0; i < 8; i++) if (kids[i] > 0) kill(kids[i], SIGKILL);
        while (wait(nullptr) > 0) {}
        if (!died) breach("8 x 200 MiB fit in the container");
        done();
    } else if (m == "nofile") {  // the per-run open-files limit holds
        int n = 0;
        while (n < 100000 && open("/dev/null", O_RDONLY) >= 0) n++;
        if (n >= 1024) breach("opened 1024+ files");
        done();
    } else if (m == "tmpstate") {  // nothing survives in /tmp from an earlier case
        if (access("/tmp/ok", F_OK) == 0 || access("/tmp/sparse", F_OK) == 0) breach("found files of an earlier case");
        done();
    } else if (m == "ids") {  // runs as an unprivileged uid with no capabilities
        if (getuid() == 0 || geteuid() == 0) breach("running as root");
        FILE *f = fopen("/proc/self/status", "r");
        char line[256];
        while (f && fgets(line, sizeof line, f)) {
            if ((!strncmp(line, "CapEff:", 7) || !strncmp(line, "CapPrm:", 7) || !strncmp(line, "CapBnd:", 7) && false) &&
                strcmp(line + 7, "\t0000000000000000\n") != 0) breach(line);
            if (!strncmp(line, "NoNewPrivs:", 11) && strcmp(line + 11, "\t1\n") != 0) breach("no_new_privs unset");
            if (!strncmp(line, "Seccomp:", 8) && strcmp(line + 8, "\t2\n") != 0) breach("no seccomp filter");
        }
        done();
    } else {
        printf("unknown mode %s\n", mode);
    }
    return 0;
}
