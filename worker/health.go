package worker

import (
	"encoding/json"
	"net/http"
)

// Handler serves GET /healthz (the Status as JSON; 503 when a dependency is
// unhealthy) and GET /metrics (Prometheus text format). Neither runs
// anything: they show what the node's own loops last observed.
func (n *Node) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		st := n.Status()
		code := http.StatusOK
		for _, d := range st.Dependencies {
			if !d.Healthy {
				code = http.StatusServiceUnavailable
			}
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(st)
	})
	mux.Handle("GET /metrics", n.prom.handler())
	return mux
}
