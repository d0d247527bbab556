package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestVersionCommand(t *testing.T) {
	t.Parallel()
	for _, arg := range []string{"version", "--version", "-v"} {
		var out, errb bytes.Buffer
		require.Equal(t, 0, run(context.Background(), []string{arg}, &out, &errb, func(string) string { return "" }), errb.String())
		require.True(t, strings.HasPrefix(out.String(), "kece-control "), out.String())
	}
}
