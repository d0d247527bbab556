package httpapi_test

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/kece-oj/kece/contracts/businessapi"
	"github.com/kece-oj/kece/control/controltest"
	"github.com/kece-oj/kece/control/store"
)

// BenchmarkUploadNewVersusHeld prints how long an upload of 4 KiB takes
// over the business API when the content is new and when another tenant
// holds it (docs/business.md, "No existence oracle on test data"): the
// medians of both, their 90th percentiles, and in how many rounds the
// held content was the faster, over 300 rounds alternating which goes
// first. Both uploads are by the same tenant and both answer 201. It
// prints figures; it fails on nothing but a broken upload.
//
//	go test -run '^$' -bench UploadNewVersusHeld -benchtime 1x ./control/httpapi/
func BenchmarkUploadNewVersusHeld(b *testing.B) {
	const rounds, size = 300, 4 << 10
	env := controltest.Start(b, controltest.Options{})
	ctx := context.Background()
	tenant := func(name, typ string) *businessapi.ClientWithResponses {
		tok, err := env.Store.Tokens().IssueToken(ctx, store.TokenSpec{Kind: store.TokenBusiness, Name: name, SubmissionTypes: []string{typ}})
		if err != nil {
			b.Fatal(err)
		}
		c, err := businessapi.NewClientWithResponses(env.URL, businessapi.WithRequestEditorFn(controltest.Bearer(tok)))
		if err != nil {
			b.Fatal(err)
		}
		return c
	}
	holder, uploader := tenant("holder", "ALGO"), tenant("uploader", "DATABASE")
	put := func(c *businessapi.ClientWithResponses, body []byte) time.Duration {
		start := time.Now()
		r, err := c.UploadArtifactWithBodyWithResponse(ctx, digestOf(body), "application/octet-stream", bytes.NewReader(body))
		took := time.Since(start)
		if err != nil || r.StatusCode() != http.StatusCreated {
			b.Fatalf("upload: %v %s", err, r.Body)
		}
		return took
	}
	random := func() []byte {
		p := make([]byte, size)
		_, _ = crand.Read(p) // never fails (crypto/rand)
		return p
	}
	for range b.N {
		held := make([][]byte, rounds)
		for i := range held {
			held[i] = random()
			put(holder, held[i])
		}
		for range 20 { // warm the connection, the statements' plans, the page cache
			put(uploader, random())
		}
		var news, helds []time.Duration
		faster := 0
		for i := range rounds {
			fresh := random()
			var n, h time.Duration
			if i%2 == 0 {
				n, h = put(uploader, fresh), put(uploader, held[i])
			} else {
				h, n = put(uploader, held[i]), put(uploader, fresh)
			}
			news, helds = append(news, n), append(helds, h)
			if h < n {
				faster++
			}
		}
		ms := func(d []time.Duration, q float64) float64 {
			s := slices.Clone(d)
			slices.Sort(s)
			return float64(s[int(q*float64(len(s)-1))]) / float64(time.Millisecond)
		}
		fmt.Printf("upload_bytes=%d rounds=%d new_median_ms=%.2f held_median_ms=%.2f new_p90_ms=%.2f held_p90_ms=%.2f held_faster_rounds=%d\n",
			size, rounds, ms(news, 0.5), ms(helds, 0.5), ms(news, 0.9), ms(helds, 0.9), faster)
		b.ReportMetric(ms(news, 0.5), "new-median-ms")
		b.ReportMetric(ms(helds, 0.5), "held-median-ms")
	}
}
