package code

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/engine"
)

const cppSum = `#include <cstdio>
int main(){long long a,b; if(scanf("%lld %lld",&a,&b)!=2) return 3; printf("%lld\n",a+b); return 0;}`

func TestSmokeCpp(t *testing.T) {
	t.Parallel()
	b := setup(t, "cpp")
	v := b.run(t, b.task(t, "cpp", cppSum, tcase{in: "1 2\n", exp: "3\n"}, tcase{in: "5 5\n", exp: "11\n"}))
	t.Logf("%+v", v)
	require.Equal(t, engine.StatusWrongAnswer, v.Status)
	require.Equal(t, engine.StatusAccepted, v.Cases[0].Status)
}
