package worker

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestDefaultLocalSlots(t *testing.T) {
	t.Parallel()
	const gib = int64(1 << 30)
	for _, c := range []struct {
		name string
		pool string
		cpus int
		mem  int64
		want int
	}{
		{"cores bound cpp", "cpp", 4, 32 * gib, 4},
		{"memory bounds cpp", "cpp", 16, 5 * gib, 4},
		{"java needs 2GiB a slot", "java", 16, 9 * gib, 4},
		{"arkts like java", "arkts", 8, 33 * gib, 8},
		{"mysql needs 512MiB a slot", "mysql", 8, 3 * gib, 4},
		{"tiny host still gets one", "python", 1, 512 << 20, 1},
		{"no memory figure still gets one", "cpp", 8, 0, 1},
		{"protocol bound", "mysql", 1024, 4096 * gib, MaxLocalSlots},
	} {
		require.Equal(t, c.want, DefaultLocalSlots(c.pool, c.cpus, c.mem), c.name)
	}
}
