package worker_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/contracts/machineapi"
)

// The heartbeat carries the backend's probed language reports in the machine
// contract's shape: command lines rendered for a shell, versions as probed;
// and the problem types its executor judges.
// A small recording proxy in front of the real control plane reads them.
func TestHeartbeatCarriesLanguages(t *testing.T) {
	t.Parallel()
	e := env(t, 3*time.Second)
	nd := e.NewNode("cpp", 1, 4)
	up, err := url.Parse(e.URL)
	require.NoError(t, err)
	var mu sync.Mutex
	var beats []machineapi.HeartbeatRequest
	rp := httputil.NewSingleHostReverseProxy(up)
	px := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/heartbeat") {
			b, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(b))
			var hb machineapi.HeartbeatRequest
			if json.Unmarshal(b, &hb) == nil {
				mu.Lock()
				beats = append(beats, hb)
				mu.Unlock()
			}
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(px.Close)
	runNode(t, nodeConfig(t, px.URL, "cpp", nd.JoinCode, newFake(false)))

	var got []machineapi.LanguageReport
	var features []machineapi.Feature
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, hb := range beats {
			if hb.Languages != nil {
				got = *hb.Languages
				if hb.Features != nil {
					features = *hb.Features
				}
				return true
			}
		}
		return false
	}, 10*time.Second, 20*time.Millisecond)
	require.Equal(t, []machineapi.Feature{machineapi.FeatureBatch, machineapi.FeatureFileIO}, features,
		"the problem types the executor says it judges, with the languages")
	require.Equal(t, []machineapi.LanguageReport{{Id: "cpp17", Pool: machineapi.PoolCpp, Standard: "Fake C++17",
		Version: "fake-runtime 1.0", CompileCommand: `fakecc -o main 'it'\''s main.cpp'`, RunCommand: "./main",
		EntryPoint: "saved as main.cpp", MinMemoryBytes: 1 << 20}}, got)
}
