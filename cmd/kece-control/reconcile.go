package main

import (
	"context"
	"io"
)

// reconcile is wired once the store's invariant checks land.
func reconcile(ctx context.Context, args []string, stdout io.Writer) (bool, error) {
	_, _, _ = ctx, args, stdout
	return false, usagef("reconcile is not available in this build yet")
}
