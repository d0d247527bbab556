package browsertest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/stretchr/testify/require"
)

// Widths every page is checked at: a laptop and a phone.
var widths = []int64{1280, 390}

// browser is one headless Chromium tab on the console.
type browser struct {
	t     *testing.T
	ctx   context.Context
	base  string
	shots string
}

func newBrowser(t *testing.T, exe, base string) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.WindowSize(1280, 900),
		chromedp.Flag("disable-dev-shm-usage", true))
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancel)
	ctx, cancel2 := chromedp.NewContext(actx)
	t.Cleanup(cancel2)
	shots := os.Getenv("KECE_SCREENSHOT_DIR")
	if shots == "" {
		shots = t.TempDir()
	}
	require.NoError(t, os.MkdirAll(shots, 0o755))
	// The first action starts the browser, which lives as long as the
	// context of that call: no timeout on it.
	require.NoError(t, chromedp.Do(ctx, chromedp.EmulateViewport(1280, 900)), "start chromium")
	return &browser{t: t, ctx: ctx, base: base, shots: shots}
}

func (b *browser) do(steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 60*time.Second)
	defer cancel()
	require.NoError(b.t, chromedp.Do(ctx, steps...))
}

func eval[T any](b *browser, js string) T {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[T](js))
	require.NoError(b.t, err, js)
	return v
}

// open navigates to a console path and waits for the page.
func (b *browser) open(path string) {
	b.t.Helper()
	b.do(chromedp.Navigate(b.base+path), chromedp.WaitReady(chromedp.CSS("main")))
}

// submit clicks a button that submits a form and waits for the answer page;
// it returns that page's HTTP status.
func (b *browser) submit(button string) int64 {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 60*time.Second)
	defer cancel()
	res, err := chromedp.RunResponse(ctx, chromedp.Click(chromedp.CSS(button)))
	require.NoError(b.t, err, button)
	require.NotNil(b.t, res, button)
	b.do(chromedp.WaitReady(chromedp.CSS("main")))
	return res.Status
}

// fill sets form fields by CSS selector.
func (b *browser) fill(fields ...string) {
	b.t.Helper()
	for i := 0; i+1 < len(fields); i += 2 {
		b.do(chromedp.SetValue(chromedp.CSS(fields[i]), fields[i+1]))
	}
}

// waitFor waits until the page's own live updates make a JS predicate true
// (no reload: the console refreshes its live parts itself).
func (b *browser) waitFor(what, js string, limit time.Duration) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, limit+5*time.Second)
	defer cancel()
	_, err := chromedp.Run(ctx, chromedp.Poll[bool](js, chromedp.WithPollingInterval(200*time.Millisecond), chromedp.WithPollingTimeout(limit)))
	if err != nil {
		html, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string](`document.querySelector("main").innerText`))
		b.t.Fatalf("waiting for %s: %v\npage:\n%s", what, err, html)
	}
}

func (b *browser) text(sel string) string {
	b.t.Helper()
	return eval[string](b, fmt.Sprintf(`(document.querySelector(%q) || {innerText: ""}).innerText`, sel))
}

// checkPage runs the named checks on the current page and saves its
// screenshots: no horizontal scrolling at each width, every form control
// labelled, every action reachable with the Tab key.
func (b *browser) checkPage(name string) {
	b.t.Helper()
	b.checkKeyboard(name)
	b.checkLabels(name)
	eval[bool](b, `(document.activeElement && document.activeElement.blur(), true)`)
	for _, w := range widths {
		b.do(chromedp.EmulateViewport(w, 900))
		fits := eval[bool](b, `document.documentElement.scrollWidth <= window.innerWidth`)
		if !fits {
			sw := eval[int](b, `document.documentElement.scrollWidth`)
			b.t.Errorf("%s at %d px: the page scrolls sideways (scrollWidth %d)", name, w, sw)
		}
		png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
		require.NoError(b.t, err)
		require.NoError(b.t, os.WriteFile(filepath.Join(b.shots, fmt.Sprintf("%s-%d.png", name, w)), png, 0o644))
	}
	b.do(chromedp.EmulateViewport(1280, 900))
}

// labelJS lists form controls without an accessible label and buttons
// without a name.
const labelJS = `(() => {
  const bad = [];
  for (const e of document.querySelectorAll('input:not([type=hidden]), select, textarea')) {
    const byFor = e.id && document.querySelector('label[for="' + CSS.escape(e.id) + '"]');
    if (!byFor && !e.closest('label') && !e.getAttribute('aria-label') && !e.getAttribute('aria-labelledby')) {
      bad.push(e.outerHTML.slice(0, 120));
    }
  }
  for (const e of document.querySelectorAll('button')) {
    if (!e.innerText.trim() && !e.getAttribute('aria-label')) bad.push(e.outerHTML.slice(0, 120));
  }
  return bad;
})()`

func (b *browser) checkLabels(name string) {
	b.t.Helper()
	bad := eval[[]string](b, labelJS)
	require.Empty(b.t, bad, "%s: unlabelled form controls", name)
}

// keyJS names an element stably across live refreshes of its region.
const keyJS = `function kkey(e) {
  if (!e || e === document.body) return "";
  return e.tagName + "|" + (e.id || "") + "|" + (e.getAttribute("href") || e.getAttribute("name") || "") + "|" +
    (e.closest("form") ? e.closest("form").getAttribute("action") : "") + "|" + (e.innerText || e.value || "").trim().slice(0, 30);
}`

// checkKeyboard tabs through the page from its start and requires every
// action (link, button, form control, summary) to take the focus.
func (b *browser) checkKeyboard(name string) {
	b.t.Helper()
	want := eval[[]string](b, `(() => { `+keyJS+`
	  const els = [...document.querySelectorAll('a[href], button, input:not([type=hidden]), select, textarea, summary, pre[tabindex]')]
	    .filter(e => !e.disabled && e.getClientRects().length > 0);
	  document.activeElement && document.activeElement.blur();
	  window.getSelection().removeAllRanges();
	  return els.map(kkey); })()`)
	require.NotEmpty(b.t, want, name)
	seen := map[string]bool{}
	left := len(want)
	// Some controls take several stops (a datetime-local input has one per
	// field), so allow plenty, and stop once everything was reached.
	for i := 0; i < 4*len(want)+20 && left > 0; i++ {
		b.do(chromedp.KeyEvent(kb.Tab))
		k := eval[string](b, `(() => { `+keyJS+` return kkey(document.activeElement); })()`)
		if !seen[k] && slices.Contains(want, k) {
			left--
		}
		seen[k] = true
	}
	var missed []string
	for _, k := range want {
		if !seen[k] {
			missed = append(missed, k)
		}
	}
	require.Empty(b.t, missed, "%s: actions the Tab key never reaches", name)
}

// Pages only an admin may see redirect to the login form.
func (b *browser) requireLogin(path string) {
	b.t.Helper()
	b.open(path)
	loc, err := chromedp.Run(b.ctx, chromedp.Location())
	require.NoError(b.t, err)
	require.True(b.t, strings.HasSuffix(loc, "/console/login"), "%s answered %s without a session", path, loc)
}
