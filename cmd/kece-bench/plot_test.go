package main

import (
	"image/png"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Lines of every slope end (a step-order bug once looped forever on a
// shallow ideal line), and the plot is a readable PNG of the chosen size.
func TestBurstPlotDrawsAnySlope(t *testing.T) {
	t.Parallel()
	done := make([]float64, 300)
	for i := range done {
		done[i] = 6.5 + float64(i)*3.63
	}
	path := filepath.Join(t.TempDir(), "p.png")
	finished := make(chan error, 1)
	go func() { finished <- writeBurstPlot(path, done, 2, 7.3, 300) }()
	select {
	case err := <-finished:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("plot did not finish")
	}
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	img, err := png.Decode(f)
	require.NoError(t, err)
	require.Equal(t, 900, img.Bounds().Dx())
	require.Equal(t, 540, img.Bounds().Dy())
}
