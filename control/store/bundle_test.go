package store_test

import (
	"testing"

	"github.com/kece-oj/kece/control/internal/storetest"
)

// testBundle is the test bundle the store's and the lease engine's tests
// share (control/internal/storetest), with the methods only the store's
// tests add.
type testBundle struct{ *storetest.Bundle }

func setup(t *testing.T) *testBundle {
	t.Helper()
	return &testBundle{storetest.Setup(t)}
}
