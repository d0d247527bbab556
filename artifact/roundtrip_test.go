package artifact

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestStoreToCacheOverHTTP wires both halves through loopback HTTP the way
// the control plane and a node do: PUT streams into Store.Put with the
// request's Content-Length (-1 when chunked), GET serves Store.Open, and the
// node cache fetches from it.
func TestStoreToCacheOverHTTP(t *testing.T) {
	t.Parallel()
	// The limit leaves the too-large upload below within the 256 KiB that
	// net/http drains after a handler stops reading, so the client always
	// sees the 413 instead of a reset connection.
	s := newStore(t, StoreConfig{MaxArtifactBytes: 512 << 10})
	mux := http.NewServeMux()
	mux.HandleFunc("PUT /a/{digest}", func(w http.ResponseWriter, r *http.Request) {
		created, err := s.Put(r.Context(), r.PathValue("digest"), r.ContentLength, r.Body)
		switch {
		case errors.Is(err, ErrInvalid):
			http.Error(w, err.Error(), http.StatusBadRequest)
		case errors.Is(err, ErrTooLarge):
			http.Error(w, err.Error(), http.StatusRequestEntityTooLarge)
		case errors.Is(err, ErrDigestMismatch), errors.Is(err, ErrSizeMismatch):
			http.Error(w, err.Error(), http.StatusUnprocessableEntity)
		case err != nil:
			http.Error(w, err.Error(), http.StatusInternalServerError)
		case created:
			w.WriteHeader(http.StatusCreated)
		default:
			w.WriteHeader(http.StatusOK)
		}
	})
	mux.HandleFunc("GET /a/{digest}", func(w http.ResponseWriter, r *http.Request) {
		f, _, err := s.Open(r.PathValue("digest"))
		if errors.Is(err, ErrNotFound) {
			http.Error(w, "missing", http.StatusNotFound)
			return
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		defer f.Close()
		http.ServeContent(w, r, "", time.Time{}, f)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	put := func(d string, body io.Reader, chunked bool) int {
		req, err := http.NewRequest(http.MethodPut, srv.URL+"/a/"+d, body)
		require.NoError(t, err)
		if chunked {
			req.ContentLength = -1 // Transfer-Encoding: chunked
		}
		resp, err := srv.Client().Do(req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		require.NoError(t, resp.Body.Close())
		return resp.StatusCode
	}
	fetch := func(d string) FetchFunc {
		return func(ctx context.Context) (io.ReadCloser, error) {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/a/"+d, nil)
			if err != nil {
				return nil, err
			}
			resp, err := srv.Client().Do(req)
			if err != nil {
				return nil, err
			}
			if resp.StatusCode != http.StatusOK {
				_ = resp.Body.Close()
				return nil, fmt.Errorf("GET: %s", resp.Status)
			}
			return resp.Body, nil
		}
	}

	input := randomBytes(300, 300<<10)
	din := digestOf(input)
	require.Equal(t, http.StatusCreated, put(din, bytes.NewReader(input), false))
	require.Equal(t, http.StatusOK, put(din, bytes.NewReader(input), true))
	require.Equal(t, http.StatusCreated, put(EmptyDigest, http.NoBody, false))
	require.Equal(t, http.StatusUnprocessableEntity, put(din, bytes.NewReader(input[1:]), false))
	require.Equal(t, http.StatusRequestEntityTooLarge, put(digestOf(make([]byte, 600<<10)), bytes.NewReader(make([]byte, 600<<10)), true))
	require.Equal(t, http.StatusBadRequest, put(strings.ToUpper(din), bytes.NewReader(input), false))

	c, err := OpenCache(context.Background(), CacheConfig{Dir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.Close()) })
	acquireContent(t, c, din, input, fetch(din)).Release()
	acquireContent(t, c, EmptyDigest, nil, fetch(EmptyDigest)).Release()

	// A digest the store does not have is a fetch error, never an empty file.
	missing := digestOf([]byte("not uploaded"))
	_, err = c.Acquire(context.Background(), missing, 12, fetch(missing))
	require.ErrorContains(t, err, strconv.Itoa(http.StatusNotFound))
	requireNoFile(t, layoutPath(c.Dir(), missing))
}
