// Package reference holds the accepted a+b program of each code pool: read
// two integers from stdin, print their sum. It is the one copy that the
// pools' self-checks (control/checks), the benchmarks (kece-bench) and the
// demo (kece-demo) judge, so a runtime change is made once.
//
// It owns no problem data: each caller publishes its own cases and limits.
// SQL problems are not here; their answers belong to their schemas.
package reference

import "github.com/kece-oj/kece/contracts/machineapi"

// Program is an accepted solution in one language.
type Program struct {
	Language string
	Source   string
}

// aPlusB is keyed by pool. The C++ program uses cstdio (faster to compile
// than iostream, which every benchmark pays per job); the ArkTS one uses
// BigInt so sums past 2^53 stay exact, and writes through fs because the
// arkts stand-in runtime has no console typings.
var aPlusB = map[machineapi.Pool]Program{
	machineapi.PoolCpp: {"cpp17", `#include <cstdio>
int main() {
    long long a, b;
    if (std::scanf("%lld %lld", &a, &b) != 2) return 1;
    std::printf("%lld\n", a + b);
    return 0;
}
`},
	machineapi.PoolJava: {"java17", `import java.util.Scanner;

public class Main {
    public static void main(String[] args) {
        Scanner in = new Scanner(System.in);
        long a = in.nextLong(), b = in.nextLong();
        System.out.println(a + b);
    }
}
`},
	machineapi.PoolPython: {"python3", `a, b = map(int, input().split())
print(a + b)
`},
	machineapi.PoolArkts: {"arkts", `const fs = require("fs");
const w: string[] = fs.readFileSync(0, "utf8").split(/\s+/).filter((s: string) => s.length > 0);
fs.writeSync(1, String(BigInt(w[0]) + BigInt(w[1])) + "\n");
`},
}

// APlusB returns the accepted a+b program of a code pool; ok is false for
// the mysql pool and unknown pools.
func APlusB(pool string) (p Program, ok bool) {
	p, ok = aPlusB[machineapi.Pool(pool)]
	return p, ok
}
