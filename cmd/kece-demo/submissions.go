package main

import (
	"github.com/kece-oj/kece/cmd/internal/problems"
	"github.com/kece-oj/kece/contracts/machineapi"
	"github.com/kece-oj/kece/internal/reference"
)

type submission struct {
	typ, id, lang, source, manifest, want string
}

const (
	cppWA  = "#include <cstdio>\nint main(){long long a,b;std::scanf(\"%lld %lld\",&a,&b);std::printf(\"%lld\\n\",a-b);}\n"
	cppTLE = "int main(){volatile unsigned long x=0;for(;;)x++;}\n"
	cppCE  = "int main( { return 0 }\n"
	pyRE   = "a, b = map(int, input().split())\nraise ValueError('no sums today')\n"
	sqlAC  = problems.BigCitiesAnswer
	sqlWA  = "SELECT name FROM city ORDER BY name"
)

// The accepted a+b programs, one per code pool.
var cppAC, pyAC, javaAC, arkAC = aPlusB(machineapi.PoolCpp), aPlusB(machineapi.PoolPython),
	aPlusB(machineapi.PoolJava), aPlusB(machineapi.PoolArkts)

func aPlusB(pool machineapi.Pool) string {
	p, _ := reference.APlusB(string(pool))
	return p.Source
}

// submissions lists what the demo judges, with the verdict each must get.
func submissions(pools []string, code, sqlManifest string) []submission {
	has := map[string]bool{}
	for _, p := range pools {
		has[p] = true
	}
	var out []submission
	add := func(pool, id, lang, src, man, want string) {
		if has[pool] {
			typ := "ALGO"
			if pool == string(machineapi.PoolMysql) {
				typ = "DATABASE"
			}
			out = append(out, submission{typ, id, lang, src, man, want})
		}
	}
	add(string(machineapi.PoolCpp), "1001", "cpp17", cppAC, code, "AC")
	add(string(machineapi.PoolCpp), "1002", "cpp17", cppWA, code, "WA")
	add(string(machineapi.PoolCpp), "1003", "cpp17", cppTLE, code, "TLE")
	add(string(machineapi.PoolCpp), "1004", "cpp17", cppCE, code, "CE")
	add(string(machineapi.PoolPython), "1005", "python3", pyAC, code, "AC")
	add(string(machineapi.PoolPython), "1006", "python3", pyRE, code, "RE")
	add(string(machineapi.PoolJava), "1007", "java17", javaAC, code, "AC")
	add(string(machineapi.PoolArkts), "1008", "arkts", arkAC, code, "AC")
	// Same numeric id as an ALGO submission: a different submission type.
	add(string(machineapi.PoolMysql), "1001", "mysql", sqlAC, sqlManifest, "AC")
	add(string(machineapi.PoolMysql), "1002", "mysql", sqlWA, sqlManifest, "WA")
	return out
}
