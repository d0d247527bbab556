package store_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/control/store"
)

func TestClassifyDriverErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		err  error
		want error // nil: unchanged
	}{
		{"connection refused", fmt.Errorf("store: x: %w", &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}), store.ErrUnavailable},
		{"invalid connection", fmt.Errorf("store: x: %w", mysql.ErrInvalidConn), store.ErrUnavailable},
		{"client error 2013", &mysql.MySQLError{Number: 2013, Message: "lost connection"}, store.ErrUnavailable},
		{"deadlock after retries", &mysql.MySQLError{Number: 1213}, store.ErrUnavailable},
		{"lock wait after retries", &mysql.MySQLError{Number: 1205}, store.ErrUnavailable},
		{"syntax error", &mysql.MySQLError{Number: 1064, Message: "syntax"}, store.ErrDatabase},
		{"not found", fmt.Errorf("job 1: %w", store.ErrNotFound), nil},
		{"cancelled", context.Canceled, nil},
	} {
		got := store.Classify(tc.err)
		if tc.want == nil {
			require.Equal(t, tc.err, got, tc.name)
			continue
		}
		require.ErrorIs(t, got, tc.want, tc.name)
		require.ErrorIs(t, got, tc.err, "%s: the cause stays in the chain", tc.name)
		other := store.ErrDatabase
		if errors.Is(tc.want, store.ErrDatabase) {
			other = store.ErrUnavailable
		}
		require.NotErrorIs(t, got, other, tc.name)
	}
	require.NoError(t, store.Classify(nil))
}
