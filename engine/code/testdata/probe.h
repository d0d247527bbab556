// The problem's side looks for the contestant's files (docs/engine.md,
// "Interactive problems" and "Communication tasks": neither side can read
// the other's files). Used by interactor.cpp and manager.cpp in mode
// "probe", uploaded beside them as a checker file.
//
// probe(marker, control, host) reads every regular file under every mount of
// its own container (except /proc, /sys, /dev and the image's root, which
// hold nothing of a job) and looks for marker, a string only the
// contestant's source and build contain; control is a string only the case's
// expected output (/exp, which the problem's side is meant to read) contains,
// so a probe that reads nothing cannot pass. It also tries the host path of
// the judge's workspace, where the contestant's work dir lives, and looks
// for a process of the contestant's uid (its own uid + 1). The marker and
// the control string arrive reversed in the case input, so the input files
// contain neither.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

struct Probe {
    std::string marker, control;
    std::string found;    // what of the contestant's was readable; empty when nothing
    bool sawControl = false;
    int files = 0, mounts = 0;

    void file(const std::string &path) {
        int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0) return;
        struct stat st;
        if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
            close(fd);
            return;
        }
        files++;
        std::string data;
        char buf[1 << 16];
        for (ssize_t n; data.size() < (64u << 20) && (n = read(fd, buf, sizeof buf)) > 0;) data.append(buf, n);
        close(fd);
        if (data.find(marker) != std::string::npos && found.empty()) found = "the contestant's file " + path;
        if (data.find(control) != std::string::npos) sawControl = true;
    }

    void walk(const std::string &path, int depth) {
        struct stat st;
        if (lstat(path.c_str(), &st) != 0) return;
        if (S_ISREG(st.st_mode)) return file(path);
        if (!S_ISDIR(st.st_mode) || depth > 16) return;
        DIR *d = opendir(path.c_str());
        if (!d) return;
        std::vector<std::string> names;
        while (dirent *e = readdir(d))
            if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) names.push_back(e->d_name);
        closedir(d);
        for (auto &n : names) walk(path == "/" ? "/" + n : path + "/" + n, depth + 1);
    }

    // mountPoints lists the container's mount points from
    // /proc/self/mountinfo (field 5, octal escapes decoded).
    static std::vector<std::string> mountPoints() {
        std::vector<std::string> out;
        FILE *f = fopen("/proc/self/mountinfo", "r");
        if (!f) return out;
        char line[4096];
        while (fgets(line, sizeof line, f)) {
            char mp[2048];
            if (sscanf(line, "%*s %*s %*s %*s %2047s", mp) != 1) continue;
            std::string s;
            for (char *p = mp; *p; p++) {
                if (p[0] == '\\' && p[1] && p[2] && p[3]) {
                    s += char((p[1] - '0') * 64 + (p[2] - '0') * 8 + (p[3] - '0'));
                    p += 3;
                } else {
                    s += *p;
                }
            }
            out.push_back(s);
        }
        fclose(f);
        return out;
    }

    void run(const std::string &host) {
        for (auto &m : mountPoints()) {
            if (m == "/" || m.rfind("/proc", 0) == 0 || m.rfind("/sys", 0) == 0 || m.rfind("/dev", 0) == 0) continue;
            mounts++;
            walk(m, 0);
        }
        // The contestant's work dir on the host, which is not mounted here.
        if (found.empty() && access(host.c_str(), F_OK) == 0) found = "the judge's workspace " + host;
        // A process of the contestant's uid, whose /proc/<pid>/cwd and exe
        // would be its files.
        uid_t them = getuid() + 1;
        if (DIR *d = opendir("/proc")) {
            while (dirent *e = readdir(d)) {
                if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
                struct stat st;
                std::string p = std::string("/proc/") + e->d_name;
                if (stat(p.c_str(), &st) == 0 && st.st_uid == them && found.empty()) found = "a process of the contestant's uid, " + p;
            }
            closedir(d);
        }
    }
};

// probeFiles runs the probe with the reversed marker and control string of
// the case input. It returns 0 and a summary when nothing of the
// contestant's was found, 1 (WA) naming what was, 3 (FAIL) when the probe
// did not even see the expected output it must see.
static int probeFiles(std::string revMarker, std::string revControl, const std::string &host, std::string &msg) {
    Probe p;
    std::reverse(revMarker.begin(), revMarker.end());
    std::reverse(revControl.begin(), revControl.end());
    p.marker = revMarker;
    p.control = revControl;
    p.run(host);
    char buf[256];
    if (!p.found.empty()) {
        msg = "probe read " + p.found;
        return 1;
    }
    if (!p.sawControl || p.files == 0) {
        snprintf(buf, sizeof buf, "probe broken: read %d files in %d mounts and not the expected output", p.files, p.mounts);
        msg = buf;
        return 3;
    }
    snprintf(buf, sizeof buf, "probe: %d files in %d mounts read, none of them the contestant's", p.files, p.mounts);
    msg = buf;
    return 0;
}
