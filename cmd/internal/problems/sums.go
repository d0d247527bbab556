package problems

import (
	"context"
	"fmt"
	"strconv"

	"github.com/kece-oj/kece/contracts/businessapi"
	"github.com/kece-oj/kece/contracts/machineapi"
	"github.com/kece-oj/kece/internal/reference"
)

// Case is one test of a problem: its input and its expected output, as the
// node and a native run both read them.
type Case struct {
	In, Out string
}

// SumCases returns the a+b problem's n cases: fixed pairs of signed
// integers up to 10^12 (exact in every runtime's integers, and in
// JavaScript's BigInt), the same on every call so that a benchmark's native
// baseline reads what the nodes read.
func SumCases(n int) []Case {
	out := make([]Case, n)
	a, b := int64(7), int64(-3)
	for i := range out {
		// A small linear congruence: varied signs and sizes, no randomness.
		a = (a*48271 + 11) % 1_000_000_000_007
		b = (b*69621 - 5) % 999_999_999_989
		if i%3 == 1 {
			a = -a
		}
		out[i] = Case{In: fmt.Sprintf("%d %d\n", a, b), Out: strconv.FormatInt(a+b, 10) + "\n"}
	}
	return out
}

// CodeManifest uploads cases (weight 10 each) and returns a CODE manifest
// with checker ck and the limits of APlusB; an interactive checker gets a
// 5 s idleness limit as well.
func CodeManifest(ctx context.Context, c *businessapi.ClientWithResponses, cases []Case, ck businessapi.Checker) (businessapi.Manifest, error) {
	m := businessapi.Manifest{Kind: businessapi.ManifestKindCode,
		Limits:  businessapi.Limits{TimeMs: 1000, MemoryMb: 256, OutputKb: 64},
		Checker: ck}
	if ck.Type == businessapi.CheckerTypeInteractive {
		wall := int64(5000)
		m.Limits.WallMs = &wall
	}
	for i, tc := range cases {
		in, inSize, err := Upload(ctx, c, tc.In)
		if err != nil {
			return m, err
		}
		out, outSize, err := Upload(ctx, c, tc.Out)
		if err != nil {
			return m, err
		}
		m.Cases = append(m.Cases, businessapi.ManifestCase{CaseId: strconv.Itoa(i + 1), InputSha256: in, InputSize: inSize,
			OutputSha256: out, OutputSize: outSize, Weight: 10})
	}
	return m, nil
}

// Special uploads a checker or interactor program and the files laid next
// to it, and returns the manifest's special part.
func Special(ctx context.Context, c *businessapi.ClientWithResponses, language, source string, files map[string]string,
	protocol *businessapi.CheckerProtocol) (*businessapi.SpecialChecker, error) {
	digest, size, err := Upload(ctx, c, source)
	if err != nil {
		return nil, err
	}
	sp := &businessapi.SpecialChecker{Language: language, SourceSha256: digest, SourceSize: size, Protocol: protocol}
	var fs []businessapi.CheckerFile
	for name, content := range files {
		d, n, err := Upload(ctx, c, content)
		if err != nil {
			return nil, err
		}
		fs = append(fs, businessapi.CheckerFile{Name: name, Sha256: d, Size: n})
	}
	if len(fs) > 0 {
		sp.Files = &fs
	}
	return sp, nil
}

// SumProgram returns the accepted a+b program of a language: the pools'
// reference programs (internal/reference) for cpp17, java17 and python3, C
// for c17, and for javascript and arkts programs that read one line, not
// the whole input. Every one answers as soon as it has read its line, so
// each also solves the interactive problem: an interactive program never
// sees the end of its input while the interactor lives (the interactor's
// supervisor holds the pipe, docs/engine.md "Interactive problems"), so the
// reference programs of the Node pool, which read to the end, would wait
// there until the idleness limit.
func SumProgram(language string) (source string, ok bool) {
	switch language {
	case "c17":
		return sumC, true
	case "javascript":
		return sumJS, true
	case "arkts":
		return sumArkTS, true
	}
	for _, pool := range []machineapi.Pool{machineapi.PoolCpp, machineapi.PoolJava, machineapi.PoolPython} {
		if p, ok := reference.APlusB(string(pool)); ok && p.Language == language {
			return p.Source, true
		}
	}
	return "", false
}

const sumC = `#include <stdio.h>
int main(void) {
    long long a, b;
    if (scanf("%lld %lld", &a, &b) != 2) return 1;
    printf("%lld\n", a + b);
    return 0;
}
`

// sumJS reads up to its first newline with blocking reads of fd 0.
const sumJS = `const fs = require("fs");
const buf = new Uint8Array(256);
let text = "";
while (text.indexOf("\n") < 0) {
    const n = fs.readSync(0, buf, 0, buf.length, null);
    if (n === 0) break;
    text += String.fromCharCode(...buf.subarray(0, n));
}
const w = text.split(/\s+/).filter((s) => s.length > 0);
fs.writeSync(1, String(BigInt(w[0]) + BigInt(w[1])) + "\n");
`

// sumArkTS is sumJS typed for tsc --strict (the stand-in runtime's
// ambient declarations give require).
const sumArkTS = `const fs = require("fs");
const buf: Uint8Array = new Uint8Array(256);
let text: string = "";
while (text.indexOf("\n") < 0) {
    const n: number = fs.readSync(0, buf, 0, buf.length, null);
    if (n === 0) break;
    text += String.fromCharCode(...buf.subarray(0, n));
}
const w: string[] = text.split(/\s+/).filter((s: string) => s.length > 0);
fs.writeSync(1, String(BigInt(w[0]) + BigInt(w[1])) + "\n");
`

// SumChecker is the a+b problem's special checker in C++, written against
// testlib's checker interface (registerTestlibCmd, inf/ouf/ans, quitf): it
// compiles with TestlibHeader or with a problem setter's real testlib.h.
const SumChecker = `#include "testlib.h"

int main(int argc, char *argv[]) {
    registerTestlibCmd(argc, argv);
    long long want = ans.readLong();
    long long got = ouf.readLong();
    if (got != want) quitf(_wa, "expected %lld, found %lld", want, got);
    quitf(_ok, "the sum is %lld", got);
}
`

// TestlibHeader is the small part of testlib's checker interface that
// SumChecker uses, written for KECE (it is not testlib.h, which the judge
// does not ship): argv input output answer, exit 0 OK, 1 WA, 2 PE, 3 FAIL,
// the verdict word and comment on stderr. A real testlib.h is several
// thousand lines and takes seconds to compile; this one takes a fraction,
// so a checker compile costs less here than with a setter's header.
const TestlibHeader = `#pragma once
#include <cstdarg>
#include <cstdio>
#include <cstdlib>

enum TResult { _ok = 0, _wa = 1, _pe = 2, _fail = 3 };

[[noreturn]] inline void quitf(TResult r, const char *fmt, ...) {
    static const char *const words[] = {"ok", "wrong answer", "wrong output format", "FAIL"};
    std::fprintf(stderr, "%s ", words[r]);
    va_list ap;
    va_start(ap, fmt);
    std::vfprintf(stderr, fmt, ap);
    va_end(ap);
    std::fputc('\n', stderr);
    std::exit(int(r));
}

struct InStream {
    std::FILE *f = nullptr;
    TResult onError = _fail;
    long long readLong() {
        long long v;
        if (!f || std::fscanf(f, "%lld", &v) != 1) quitf(onError, "expected an integer");
        return v;
    }
};

inline InStream inf, ouf, ans;

inline void registerTestlibCmd(int argc, char *argv[]) {
    if (argc < 4) quitf(_fail, "usage: checker input output answer");
    inf.f = std::fopen(argv[1], "r");
    ouf.f = std::fopen(argv[2], "r");
    ans.f = std::fopen(argv[3], "r");
    ouf.onError = _pe;
    if (!inf.f || !ouf.f || !ans.f) quitf(_fail, "cannot open the input, output or answer");
}
`

// SumInteractor is the interactive a+b problem's interactor in C++
// (testlib's interactor convention, no testlib): argv input tout answer. It
// tells the program the case's two numbers on one line and reads the sum.
const SumInteractor = `#include <cstdio>

int main(int argc, char **argv) {
    if (argc < 4) return 3;
    std::FILE *in = std::fopen(argv[1], "r"), *tout = std::fopen(argv[2], "w"), *ans = std::fopen(argv[3], "r");
    if (!in || !tout || !ans) return 3;
    long long a, b, want, got;
    if (std::fscanf(in, "%lld %lld", &a, &b) != 2 || std::fscanf(ans, "%lld", &want) != 1) {
        std::fprintf(tout, "bad test files\n");
        return 3;
    }
    std::printf("%lld %lld\n", a, b);
    std::fflush(stdout);
    if (std::scanf("%lld", &got) != 1) {
        std::fprintf(tout, "no number in the answer\n");
        return 2;
    }
    if (got != want) {
        std::fprintf(tout, "expected %lld, found %lld\n", want, got);
        return 1;
    }
    std::fprintf(tout, "ok %lld\n", got);
    return 0;
}
`
