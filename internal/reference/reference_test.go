package reference

import (
	"testing"

	"github.com/kece-oj/kece/contracts"
	"github.com/kece-oj/kece/contracts/machineapi"
)

// Every code pool has a program, in a language its pool serves; the mysql
// pool has none here.
func TestAPlusBCoversTheCodePools(t *testing.T) {
	t.Parallel()
	for _, pool := range contracts.Pools() {
		p, ok := APlusB(pool)
		if pool == string(machineapi.PoolMysql) {
			if ok {
				t.Errorf("mysql: got a code program %q", p.Language)
			}
			continue
		}
		if !ok || p.Source == "" {
			t.Errorf("%s: no a+b program", pool)
			continue
		}
		if served, ok := contracts.PoolOfLanguage(p.Language); !ok || served != pool {
			t.Errorf("%s: language %q is served by %q (known %v)", pool, p.Language, served, ok)
		}
	}
	if _, ok := APlusB("cobol"); ok {
		t.Error("an unknown pool has a program")
	}
}
