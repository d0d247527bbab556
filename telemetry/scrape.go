package telemetry

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Samples is one scrape flattened: `name{k="v",…}` (labels sorted) → value.
// Histograms appear as their _bucket, _sum and _count series, as on the wire.
type Samples map[string]float64

// Get returns the value of name with exactly the given label pairs
// (k1, v1, k2, v2 …), and whether the series exists.
func (s Samples) Get(name string, labels ...string) (float64, bool) {
	v, ok := s[SeriesKey(name, labels...)]
	return v, ok
}

// Value is Get without the presence flag (0 when absent).
func (s Samples) Value(name string, labels ...string) float64 {
	v, _ := s.Get(name, labels...)
	return v
}

// Sum adds every series of name whose labels include the given pairs.
func (s Samples) Sum(name string, labels ...string) float64 {
	var total float64
	for k, v := range s {
		base, rest, _ := strings.Cut(k, "{")
		if base != name {
			continue
		}
		match := true
		for i := 0; i+1 < len(labels); i += 2 {
			if !strings.Contains("{"+rest, fmt.Sprintf("%s=%q", labels[i], labels[i+1])) {
				match = false
				break
			}
		}
		if match {
			total += v
		}
	}
	return total
}

// SeriesKey renders a series name with sorted labels, the key of Samples.
func SeriesKey(name string, labels ...string) string {
	if len(labels) == 0 {
		return name
	}
	pairs := make([]string, 0, len(labels)/2)
	for i := 0; i+1 < len(labels); i += 2 {
		pairs = append(pairs, fmt.Sprintf("%s=%q", labels[i], labels[i+1]))
	}
	slices.Sort(pairs)
	return name + "{" + strings.Join(pairs, ",") + "}"
}

// Scrape fetches url (a /metrics endpoint) and flattens it.
func Scrape(ctx context.Context, url string) (Samples, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape %s: %s", url, resp.Status)
	}
	return ParseText(resp.Body)
}

// ParseText flattens a text exposition.
func ParseText(r io.Reader) (Samples, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, err
	}
	out := Samples{}
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName(), l.GetValue())
			}
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				out[SeriesKey(name, labels...)] = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				out[SeriesKey(name, labels...)] = m.GetGauge().GetValue()
			case dto.MetricType_UNTYPED:
				out[SeriesKey(name, labels...)] = m.GetUntyped().GetValue()
			case dto.MetricType_HISTOGRAM:
				h := m.GetHistogram()
				out[SeriesKey(name+"_sum", labels...)] = h.GetSampleSum()
				out[SeriesKey(name+"_count", labels...)] = float64(h.GetSampleCount())
				for _, b := range h.GetBucket() {
					le := append(slices.Clone(labels), "le", fmt.Sprint(b.GetUpperBound()))
					out[SeriesKey(name+"_bucket", le...)] = float64(b.GetCumulativeCount())
				}
			case dto.MetricType_SUMMARY:
				s := m.GetSummary()
				out[SeriesKey(name+"_sum", labels...)] = s.GetSampleSum()
				out[SeriesKey(name+"_count", labels...)] = float64(s.GetSampleCount())
			}
		}
	}
	return out, nil
}
