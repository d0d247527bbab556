// File I/O modes: the first word of sum.in (in the working directory)
// selects what the program does with sum.out.
#include <cstdio>
#include <cstring>
#include <string>
#include <sys/stat.h>
#include <unistd.h>

int main() {
    FILE *in = fopen("sum.in", "r");
    if (!in) { fprintf(stderr, "no sum.in\n"); return 4; }
    char mode[64] = {0};
    long long a = 0, b = 0;
    if (fscanf(in, "%63s %lld %lld", mode, &a, &b) < 1) return 5;
    std::string m = mode;
    if (m == "sum") {  // the answer in the file, noise on stdout
        FILE *out = fopen("sum.out", "w");
        fprintf(out, "%lld\n", a + b);
        fclose(out);
        puts("debug output on stdout is ignored");
    } else if (m == "stdout") {  // the answer on stdout only: no file
        printf("%lld\n", a + b);
    } else if (m == "stdin") {  // stdin is the input only when stdio is allowed
        char w[64] = {0};
        FILE *out = fopen("sum.out", "w");
        fprintf(out, "%s\n", scanf("%63s", w) == 1 ? w : "EOF");
        fclose(out);
    } else if (m == "symlink") {  // sum.out a link to a file the judge must not read
        symlink("/etc/passwd", "sum.out");
    } else if (m == "fifo") {
        mkfifo("sum.out", 0666);
    } else if (m == "dir") {
        mkdir("sum.out", 0777);
    } else if (m == "chmod") {  // an unreadable mode does not hide the answer
        FILE *out = fopen("sum.out", "w");
        fprintf(out, "%lld\n", a + b);
        fclose(out);
        chmod("sum.out", 0);
    } else if (m == "big") {  // past the output limit
        FILE *out = fopen("sum.out", "w");
        for (int i = 0; i < (1 << 20); i++) fputs("0123456789abcdef0123456789abcdef\n", out);
        fclose(out);
    } else if (m == "replacein") {  // the input is root's: no writing, no removing
        FILE *w = fopen("sum.in", "w");
        int removed = unlink("sum.in") == 0;
        FILE *out = fopen("sum.out", "w");
        fprintf(out, "%s %s\n", w ? "written" : "readonly", removed ? "removed" : "kept");
        fclose(out);
    } else if (m == "crash") {  // writes the answer, then fails: RE, not judged
        FILE *out = fopen("sum.out", "w");
        fprintf(out, "%lld\n", a + b);
        fclose(out);
        return 3;
    } else if (m == "sqrt") {
        FILE *out = fopen("sum.out", "w");
        long long r = 0;
        while ((r + 1) * (r + 1) <= a) r++;
        fprintf(out, "%lld\n", r);
        fclose(out);
    }
    return 0;
}
