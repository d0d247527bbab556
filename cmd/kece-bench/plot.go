package main

import (
	"image"
	"image/color"
	"image/png"
	"math"
	"os"
)

// writeBurstPlot draws cumulative completions over time (blue steps) against
// the ideal line C/T·t capped at n (grey), on axes from 0 to the last
// completion and 0 to n, with tick labels in a small built-in digit font.
// Standard library only: the bench writes it, no plotting tool needed.
func writeBurstPlot(path string, doneS []float64, C int, T float64, n int) error {
	const W, H, left, right, top, bottom = 900, 540, 70, 30, 30, 60
	img := image.NewRGBA(image.Rect(0, 0, W, H))
	white := color.RGBA{255, 255, 255, 255}
	for i := range img.Pix {
		img.Pix[i] = 255
	}
	_ = white
	xmax := 1.0
	if len(doneS) > 0 {
		xmax = doneS[len(doneS)-1]
	}
	if T > 0 {
		xmax = math.Max(xmax, float64(n)*T/float64(C))
	}
	xmax = niceCeil(xmax * 1.05)
	ymax := niceCeil(float64(n) * 1.05)
	px := func(x float64) int { return left + int(x/xmax*float64(W-left-right)) }
	py := func(y float64) int { return H - bottom - int(y/ymax*float64(H-top-bottom)) }
	black, grey, blue, light := color.RGBA{0, 0, 0, 255}, color.RGBA{150, 150, 150, 255}, color.RGBA{20, 80, 200, 255}, color.RGBA{225, 225, 225, 255}
	// Grid and ticks.
	for i := 0; i <= 10; i++ {
		x := xmax * float64(i) / 10
		line(img, px(x), py(0), px(x), py(ymax), light)
		line(img, px(x), py(0), px(x), py(0)+5, black)
		digits(img, px(x)-textWidth(x)/2, py(0)+10, x, black)
		y := ymax * float64(i) / 10
		line(img, px(0), py(y), px(xmax), py(y), light)
		line(img, px(0)-5, py(y), px(0), py(y), black)
		digits(img, px(0)-10-textWidth(y), py(y)-5, y, black)
	}
	line(img, px(0), py(0), px(xmax), py(0), black)
	line(img, px(0), py(0), px(0), py(ymax), black)
	// Ideal: C/T completions per second from the first accept, capped at n.
	if T > 0 {
		tEnd := float64(n) * T / float64(C)
		thick(img, px(0), py(0), px(tEnd), py(float64(n)), grey)
		thick(img, px(tEnd), py(float64(n)), px(xmax), py(float64(n)), grey)
	}
	// Measured: a step up at each settlement.
	prevX, prevY := px(0), py(0)
	for i, d := range doneS {
		x, y := px(d), py(float64(i+1))
		thick(img, prevX, prevY, x, prevY, blue)
		thick(img, x, prevY, x, y, blue)
		prevX, prevY = x, y
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := png.Encode(f, img); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// niceCeil rounds v up to a multiple of half a power of ten.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	// Steps of half a power of ten keep the axis close to the data; the ten
	// ticks then fall on values with at most one decimal.
	step := math.Pow(10, math.Floor(math.Log10(v))) / 2
	return math.Ceil(v/step) * step
}

func line(img *image.RGBA, x0, y0, x1, y1 int, c color.Color) {
	dx, dy := abs(x1-x0), -abs(y1-y0)
	sx, sy := 1, 1
	if x0 > x1 {
		sx = -1
	}
	if y0 > y1 {
		sy = -1
	}
	e := dx + dy
	for {
		img.Set(x0, y0, c)
		if x0 == x1 && y0 == y1 {
			return
		}
		// Both tests use the error before either step (Bresenham for all
		// octants); updating e in between can step past the end and loop.
		e2 := 2 * e
		if e2 >= dy {
			e += dy
			x0 += sx
		}
		if e2 <= dx {
			e += dx
			y0 += sy
		}
	}
}

func thick(img *image.RGBA, x0, y0, x1, y1 int, c color.Color) {
	for d := -1; d <= 1; d++ {
		line(img, x0+d, y0, x1+d, y1, c)
		line(img, x0, y0+d, x1, y1+d, c)
	}
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}

// font3x5 holds the digits and '.', each 3 wide and 5 tall, row bits.
var font3x5 = map[rune][5]uint8{
	'0': {7, 5, 5, 5, 7}, '1': {2, 6, 2, 2, 7}, '2': {7, 1, 7, 4, 7}, '3': {7, 1, 7, 1, 7}, '4': {5, 5, 7, 1, 1},
	'5': {7, 4, 7, 1, 7}, '6': {7, 4, 7, 5, 7}, '7': {7, 1, 1, 1, 1}, '8': {7, 5, 7, 5, 7}, '9': {7, 5, 7, 1, 7},
	'.': {0, 0, 0, 0, 2},
}

const fontScale = 2

func label(v float64) string {
	if v == math.Trunc(v) {
		return formatInt(int64(v))
	}
	s := formatInt(int64(v)) + "."
	return s + formatInt(int64(math.Round((v-math.Trunc(v))*10)))
}

func formatInt(v int64) string {
	if v == 0 {
		return "0"
	}
	var b []byte
	for v > 0 {
		b = append([]byte{byte('0' + v%10)}, b...)
		v /= 10
	}
	return string(b)
}

func textWidth(v float64) int { return len(label(v)) * 4 * fontScale }

func digits(img *image.RGBA, x, y int, v float64, c color.Color) {
	for _, r := range label(v) {
		g := font3x5[r]
		for row := 0; row < 5; row++ {
			for col := 0; col < 3; col++ {
				if g[row]&(4>>col) != 0 {
					for a := 0; a < fontScale; a++ {
						for b := 0; b < fontScale; b++ {
							img.Set(x+col*fontScale+a, y+row*fontScale+b, c)
						}
					}
				}
			}
		}
		x += 4 * fontScale
	}
}
