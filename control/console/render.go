package console

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kece-oj/kece/contracts/adminapi"
)

// view is what every page template gets.
type view struct {
	Title string
	// Nav names the active navigation entry.
	Nav string
	// Admin is the session's admin token name ("" on public pages).
	Admin string
	CSRF  string
	// Live marks pages whose [data-live] parts the browser refreshes.
	Live   bool
	LiveMs int64
	Notice string
	Err    *apiError
	Data   any
}

// apiError is an API (or console) refusal as the page shows it: the HTTP
// status and the machine code, as the API gave them, and the message.
type apiError struct {
	Status  int
	Code    string
	Message string
}

func (e *apiError) Error() string { return e.Code + ": " + e.Message }

type statusCoder interface{ StatusCode() int }

// check turns an API answer into nil (the wanted status) or the API's own
// error code and message.
func check(r statusCoder, body []byte, err error, want int) *apiError {
	if err != nil {
		return &apiError{Status: http.StatusBadGateway, Code: "INTERNAL", Message: err.Error()}
	}
	if r.StatusCode() == want {
		return nil
	}
	var e adminapi.Error
	if json.Unmarshal(body, &e) == nil && e.Code != "" {
		return &apiError{Status: r.StatusCode(), Code: string(e.Code), Message: e.Message}
	}
	return &apiError{Status: r.StatusCode(), Code: "INTERNAL", Message: strings.TrimSpace(string(body))}
}

type pages map[string]*template.Template

var funcs = template.FuncMap{
	"ts": func(t any) string {
		switch v := t.(type) {
		case time.Time:
			return v.UTC().Format("2006-01-02 15:04:05Z")
		case *time.Time:
			if v == nil {
				return "—"
			}
			return v.UTC().Format("2006-01-02 15:04:05Z")
		}
		return "—"
	},
	"ms": func(v int64) string { return duration(time.Duration(v) * time.Millisecond) },
	"pms": func(v *int64) string {
		if v == nil {
			return "—"
		}
		return duration(time.Duration(*v) * time.Millisecond)
	},
	"str": func(v *string) string {
		if v == nil {
			return ""
		}
		return *v
	},
	"lower": strings.ToLower,
	// verdictClass is a verdict's badge: the API's fields are pointers,
	// and a template that compares a pointer with "AC" compares its
	// address.
	"verdictClass": verdictClass,
	// isTrue reads an optional flag: nil and false are false (a
	// template's if is true for any non-nil pointer).
	"isTrue": func(b *bool) bool { return b != nil && *b },
	// isFalse: the flag is there and false (an absent one says nothing).
	"isFalse": func(b *bool) bool { return b != nil && !*b },
	"int64":   func(v int32) int64 { return int64(v) },
	// phased keeps the attempts whose node reported its phases.
	"phased": func(as []adminapi.Attempt) []adminapi.Attempt {
		return slices.DeleteFunc(slices.Clone(as), func(a adminapi.Attempt) bool { return a.Phases == nil })
	},
	"phaseFlags": phaseFlags,
}

// phaseFlags names what was ready before an attempt needed it: compile
// outcomes from the node's cache, a sandbox started ahead.
func phaseFlags(p *adminapi.AttemptPhases) string {
	var out []string
	if p.CompileCached {
		out = append(out, "compile cached")
	}
	if p.CheckerCached {
		out = append(out, "checker cached")
	}
	if p.SandboxWarm {
		out = append(out, "warm sandbox")
	}
	if len(out) == 0 {
		return "—"
	}
	return strings.Join(out, ", ")
}

// verdictClass maps a verdict (a VerdictStatus or a pointer to one) to
// its badge class: ok for AC, partial for PARTIAL, bad for the rest.
func verdictClass(v any) string {
	var st adminapi.VerdictStatus
	switch x := v.(type) {
	case adminapi.VerdictStatus:
		st = x
	case *adminapi.VerdictStatus:
		if x == nil {
			return ""
		}
		st = *x
	default:
		return ""
	}
	switch st {
	case adminapi.VerdictStatusAC:
		return "ok"
	case adminapi.VerdictStatusPARTIAL:
		return "partial"
	}
	return "bad"
}

// duration renders an age or wait the way operators read it.
func duration(d time.Duration) string {
	switch {
	case d < 0:
		return "-" + duration(-d)
	case d < time.Second:
		return strconv.FormatInt(d.Milliseconds(), 10) + " ms"
	case d < time.Minute:
		return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + " s"
	case d < time.Hour:
		return fmt.Sprintf("%dm %02ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh %02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd %02dh", int(d.Hours())/24, int(d.Hours())%24)
}

// parsePages parses each page with the shared layout.
func parsePages() (pages, error) {
	names, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		return nil, err
	}
	p := pages{}
	for _, n := range names {
		base := strings.TrimSuffix(path.Base(n), ".html")
		if base == "layout" {
			continue
		}
		t, err := template.New(base).Funcs(funcs).ParseFS(templateFS, "templates/layout.html", n)
		if err != nil {
			return nil, fmt.Errorf("console: template %s: %w", n, err)
		}
		p[base] = t
	}
	return p, nil
}

// render writes one page. Session pages get the admin's name and CSRF token.
func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, name string, v view) {
	if s := session(r.Context()); s.CSRF != "" {
		v.Admin, v.CSRF = s.Admin.Name, s.CSRF
	}
	if v.Live {
		v.LiveMs = c.cfg.LiveInterval.Milliseconds()
	}
	t, ok := c.pages[name]
	if !ok {
		panic("console: no page " + name)
	}
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, "layout", v); err != nil {
		c.log.Error("console render", "page", name, "err", err)
		http.Error(w, "page rendering failed", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = buf.WriteTo(w)
}

// fail renders an error page with the status and machine code.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, e *apiError) {
	c.render(w, r, e.Status, "error", view{Title: "Error", Err: e})
}
