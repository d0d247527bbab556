// A small header written for KECE's own tests. It is NOT testlib.h: it only
// follows testlib's checker protocol, which is what the judge reads.
//   argv:    checker <input> <output> <answer>
//   exit:    0 OK, 1 WA, 2 PE, 3 FAIL, 7 points
//   stderr:  "<verdict word> <comment>", for points "points <value> <comment>"
// Problem setters upload the real testlib.h as a checker file instead
// (docs/business.md, "Special checkers").
#pragma once
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

enum TResult { _ok = 0, _wa = 1, _pe = 2, _fail = 3, _points = 7 };

[[noreturn]] inline void quit(TResult r, const std::string &msg) {
    const char *word = "points ";
    switch (r) {
    case _ok: word = "ok "; break;
    case _wa: word = "wrong answer "; break;
    case _pe: word = "wrong output format "; break;
    case _fail: word = "FAIL "; break;
    default: break;
    }
    std::fprintf(stderr, "%s%s\n", word, msg.c_str());
    std::exit(int(r));
}

[[noreturn]] inline void quitf(TResult r, const char *fmt, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    quit(r, buf);
}

[[noreturn]] inline void quitp(double points, const char *fmt, ...) {
    char msg[900], buf[1024];
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    std::snprintf(buf, sizeof buf, "%.10f %s", points, msg);
    quit(_points, buf);
}

struct InStream {
    std::ifstream f;
    TResult onEof = _fail; // the contestant's stream says PE instead
    std::string readWord() {
        std::string s;
        if (!(f >> s)) quit(onEof, "unexpected end of file");
        return s;
    }
};

inline InStream inf, ouf, ans;

inline void registerTestlibCmd(int argc, char **argv) {
    if (argc < 4) quit(_fail, "usage: checker <input> <output> <answer>");
    inf.f.open(argv[1]);
    ouf.f.open(argv[2]);
    ans.f.open(argv[3]);
    if (!inf.f || !ouf.f || !ans.f) quit(_fail, "cannot open the files");
    ouf.onEof = _pe;
}
