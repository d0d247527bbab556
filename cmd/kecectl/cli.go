package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"reflect"
	"strings"
	"time"

	"github.com/kece-oj/kece/contracts/adminapi"
)

// RequestTimeoutDefault bounds one API call.
const RequestTimeoutDefault = 30 * time.Second

var errHelp = errors.New("help")

type usageError struct{ msg, hint string }

func (e *usageError) Error() string { return e.msg }

func usagef(hint, format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...), hint: hint}
}

// violationsFound makes reconcile exit with exitViolation after printing.
type violationsFound int

func (v violationsFound) Error() string { return fmt.Sprintf("%d violations", int(v)) }

// cli is one invocation: connection, output mode, client.
type cli struct {
	ctx    context.Context
	out    io.Writer
	url    string
	json   bool
	client *adminapi.ClientWithResponses
}

// parseGlobal reads the leading global flags and the environment.
func parseGlobal(args []string, getenv func(string) string) (*cli, []string, error) {
	fs := flag.NewFlagSet("kecectl", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	url := fs.String("url", getenv("KECE_ADMIN_URL"), "control plane base URL")
	tokenFile := fs.String("token-file", "", "file holding the admin token")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, nil, errHelp
		}
		return nil, nil, usagef("kecectl [--url URL] [--token-file FILE] [--json] RESOURCE VERB ...", "%v", err)
	}
	rest := fs.Args()
	if len(rest) == 0 {
		return nil, nil, usagef("", "no command given")
	}
	if rest[0] == "help" || rest[0] == "-h" || rest[0] == "--help" {
		return nil, nil, errHelp
	}
	c := &cli{url: strings.TrimRight(*url, "/"), json: *asJSON}
	if c.url == "" {
		return nil, nil, usagef("", "no control plane URL: set KECE_ADMIN_URL or pass --url http(s)://HOST:PORT")
	}
	if !strings.HasPrefix(c.url, "http://") && !strings.HasPrefix(c.url, "https://") {
		return nil, nil, usagef("", "control plane URL %q must start with http:// or https://", c.url)
	}
	token := getenv("KECE_ADMIN_TOKEN")
	if *tokenFile != "" {
		b, err := os.ReadFile(*tokenFile)
		if err != nil {
			return nil, nil, usagef("", "cannot read --token-file: %v", err)
		}
		token = strings.TrimSpace(string(b))
	}
	if token == "" {
		return nil, nil, usagef("", "no admin token: set KECE_ADMIN_TOKEN or pass --token-file FILE "+
			"(create one with: kece-control token create --kind admin --name NAME)")
	}
	var err error
	c.client, err = adminapi.NewClientWithResponses(c.url,
		adminapi.WithHTTPClient(&http.Client{Timeout: RequestTimeoutDefault}),
		adminapi.WithRequestEditorFn(func(_ context.Context, req *http.Request) error {
			req.Header.Set("Authorization", "Bearer "+token)
			return nil
		}))
	if err != nil {
		return nil, nil, usagef("", "bad control plane URL %q: %v", c.url, err)
	}
	return c, rest, nil
}

// verbFlags is a flag set for one verb that also accepts --json.
func (c *cli) verbFlags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.BoolVar(&c.json, "json", c.json, "print JSON")
	return fs
}

// parse parses a verb's flags; positional args may come before or after flags.
func parse(fs *flag.FlagSet, hint string, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, usagef(hint, "help for %s", fs.Name())
			}
			return nil, usagef(hint, "%v", err)
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

func oneID(fs *flag.FlagSet, hint string, args []string) (string, error) {
	pos, err := parse(fs, hint, args)
	if err != nil {
		return "", err
	}
	if len(pos) != 1 {
		return "", usagef(hint, "%s needs exactly one id", fs.Name())
	}
	if !validID(pos[0]) {
		return "", usagef(hint, "%q is not an id (a positive decimal number)", pos[0])
	}
	return pos[0], nil
}

func validID(s string) bool {
	if s == "" || len(s) > 19 || s[0] == '0' {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// idAndReason parses "VERB ID --reason TEXT" (with whatever other flags the
// caller put on fs) and requires the reason, which goes to the audit log.
func idAndReason(fs *flag.FlagSet, hint string, args []string) (id, reason string, err error) {
	r := fs.String("reason", "", "why (audit log)")
	if id, err = oneID(fs, hint, args); err != nil {
		return "", "", err
	}
	if err := needReason(hint, *r); err != nil {
		return "", "", err
	}
	return id, *r, nil
}

func needReason(hint, reason string) error {
	if strings.TrimSpace(reason) == "" {
		return usagef(hint, "--reason is required: say why (it is written to the audit log)")
	}
	return nil
}

// apiResponse is what every generated response offers.
type apiResponse interface{ StatusCode() int }

// result turns a call into an error unless the status is want: the API's
// code and message, plus what to do about it. r is a generated *…Response;
// its raw Body is read by reflection (the generated types share the field,
// not a method).
func (c *cli) result(r apiResponse, err error, want int) error {
	if err != nil {
		return fmt.Errorf("cannot reach the control plane at %s: %w (check KECE_ADMIN_URL / --url)", c.url, err)
	}
	if r.StatusCode() == want {
		return nil
	}
	var body []byte
	if v := reflect.ValueOf(r); v.Kind() == reflect.Pointer && !v.IsNil() {
		if f := v.Elem().FieldByName("Body"); f.IsValid() && f.Kind() == reflect.Slice {
			body = f.Bytes()
		}
	}
	var e adminapi.Error
	if json.Unmarshal(body, &e) != nil || e.Code == "" {
		return fmt.Errorf("HTTP %d from %s: %s", r.StatusCode(), c.url, strings.TrimSpace(string(body)))
	}
	msg := fmt.Sprintf("%s (HTTP %d): %s", e.Code, r.StatusCode(), e.Message)
	if h := hint(string(e.Code)); h != "" {
		msg += "\n  hint: " + h
	}
	return errors.New(msg)
}

// hint says what to fix for the codes an operator meets most.
func hint(code string) string {
	switch code {
	case "UNAUTHENTICATED":
		return "the admin token was refused; check KECE_ADMIN_TOKEN / --token-file (kece-control token create --kind admin)"
	case "REVISION_STALE":
		return "someone changed it meanwhile; read it again (list/show) and retry with the current --revision"
	case "LEASES_ACTIVE":
		return "the node still runs jobs; drain it and wait, or pass --force with a --reason"
	case "CHECK_REQUIRED":
		return "run 'kecectl node verify ID' and wait until 'kecectl node show ID' lists a PASSED check"
	case "HEARTBEAT_STALE":
		return "the node process must be running and heartbeating; check it on its host"
	case "CHECK_IN_PROGRESS":
		return "a self-check is already queued or running; watch it with 'kecectl node show ID'"
	case "NODE_ALREADY_JOINED":
		return "the node holds a credential; use 'kecectl node rotate ID' to issue a new join code"
	case "NODE_REVOKED":
		return "a revoked node cannot come back; register a new node"
	case "ADDRESS_NOT_ALLOWED":
		return "the address is outside the control plane's probe allowlist (hosts, CIDRs, ports)"
	case "JOB_NOT_CURRENT":
		return "a newer generation exists; rejudge that one ('kecectl job list --type TYPE')"
	case "EVENT_NOT_DEAD":
		return "only events in state DEAD are redelivered; see 'kecectl events dead'"
	}
	return ""
}

// printJSON writes v as indented JSON.
func (c *cli) printJSON(v any) error {
	enc := json.NewEncoder(c.out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
