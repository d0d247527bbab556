package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"reflect"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/kece-oj/kece/cmd/internal/settings"
	"github.com/kece-oj/kece/contracts/adminapi"
	"github.com/kece-oj/kece/internal/buildinfo"
)

// Exit codes, shared by every KECE binary (docs/operations.md).
const (
	exitOK        = 0
	exitFailed    = 1
	exitUsage     = 2
	exitViolation = 3
)

// Defaults of the CLI's own settings.
const (
	// RequestTimeoutDefault bounds one API call.
	RequestTimeoutDefault = 30 * time.Second
	// PollIntervalDefault is how often --wait reads the node again.
	PollIntervalDefault = time.Second
	// WaitTimeoutDefault bounds a --wait.
	WaitTimeoutDefault = 10 * time.Minute
)

// usageError is a mistake in the command line or the settings (exit 2).
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return &usageError{msg: fmt.Sprintf(format, args...)} }

// violationsFound makes reconcile exit with exitViolation after printing.
type violationsFound int

func (v violationsFound) Error() string { return fmt.Sprintf("%d violations", int(v)) }

// cli is one invocation: where output goes, the settings, the lazily built
// client (help and completion never need a server).
type cli struct {
	ctx    context.Context
	out    io.Writer
	errOut io.Writer
	getenv func(string) string

	url       string
	tokenFile string
	output    outputFormat

	// pollEvery is the --wait polling interval (tests shorten it).
	pollEvery time.Duration
	// running is set once a command's own code runs: an error before that
	// (unknown command, bad flag, missing argument) is a usage error.
	running bool
	client  *adminapi.ClientWithResponses
}

// run executes one command line and returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	c := &cli{ctx: ctx, out: stdout, errOut: stderr, getenv: getenv, pollEvery: PollIntervalDefault, output: outputTable}
	return c.execute(args)
}

func (c *cli) execute(args []string) int {
	root := c.rootCommand()
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(c.ctx)
	var ve violationsFound
	var ue *usageError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ve):
		return exitViolation
	case errors.As(err, &ue) || !c.running:
		fmt.Fprintf(c.errOut, "kecectl: %s\n", strings.TrimRight(err.Error(), "\n"))
		if cmd != nil {
			fmt.Fprintf(c.errOut, "Run '%s --help' for usage.\n", cmd.CommandPath())
		}
		return exitUsage
	}
	fmt.Fprintf(c.errOut, "kecectl: %v\n", err)
	return exitFailed
}

func (c *cli) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "kecectl",
		Short: "Admin CLI of the KECE judge pool",
		Long: `kecectl is the admin CLI of the KECE judge pool: host groups, judge nodes,
jobs, settlement events and invariant checks, over the admin HTTP API.

Connection: KECE_ADMIN_URL or --url; the admin token is KECE_ADMIN_TOKEN, or
the file named by KECE_ADMIN_TOKEN_FILE or --token-file (create one with
'kece-control token create --kind admin --name NAME').
Nodes and host groups are addressed by name or id.

Exit codes: 0 ok; 1 the API, the network or a waited-for outcome failed;
2 usage or configuration error; 3 reconcile found violations.`,
		Version:           buildinfo.String("kecectl"),
		SilenceErrors:     true,
		SilenceUsage:      true,
		Args:              groupArgs,
		RunE:              groupRun,
		DisableAutoGenTag: true,
	}
	root.SetOut(c.out)
	root.SetErr(c.errOut)
	root.SetVersionTemplate("{{.Version}}\n")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &usageError{msg: err.Error()} })
	pf := root.PersistentFlags()
	pf.StringVar(&c.url, "url", "", "control plane base URL (default $KECE_ADMIN_URL)")
	pf.StringVar(&c.tokenFile, "token-file", "", "file holding the admin token (default $KECE_ADMIN_TOKEN_FILE, else $KECE_ADMIN_TOKEN)")
	pf.VarP(&c.output, "output", "o", "output format: table, json or yaml (default $KECE_OUTPUT, else table)")
	// The global flags take their environment variables through the one
	// settings loader the other binaries use (a flag given wins).
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		var flags []settings.Flag
		for name, env := range map[string]string{"url": "KECE_ADMIN_URL", "token-file": "KECE_ADMIN_TOKEN_FILE", "output": "KECE_OUTPUT"} {
			f := cmd.Flags().Lookup(name)
			if f == nil {
				continue
			}
			flags = append(flags, settings.Flag{Name: name, Env: env, Changed: f.Changed, Set: f.Value.Set})
		}
		if _, err := settings.ApplyEnv(flags, c.getenv); err != nil {
			return &usageError{msg: err.Error()}
		}
		return nil
	}
	_ = root.RegisterFlagCompletionFunc("output", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return outputFormats, cobra.ShellCompDirectiveNoFileComp
	})
	root.AddGroup(&cobra.Group{ID: "resources", Title: "Resources:"}, &cobra.Group{ID: "tools", Title: "Other commands:"})
	for _, cmd := range []*cobra.Command{c.hostGroupCommand(), c.nodeCommand(), c.jobCommand(), c.poolCommand(), c.eventsCommand(),
		c.tokenCommand(), c.webhookCommand(), c.auditCommand(), c.languageCommand(), c.reconcileCommand()} {
		cmd.GroupID = "resources"
		root.AddCommand(cmd)
	}
	for _, cmd := range []*cobra.Command{c.versionCommand(), c.manCommand()} {
		cmd.GroupID = "tools"
		root.AddCommand(cmd)
	}
	root.SetHelpCommandGroupID("tools")
	root.SetCompletionCommandGroupID("tools")
	// cobra adds `completion` lazily; add it now so an unknown shell is a
	// usage error like any unknown verb.
	root.InitDefaultCompletionCmd()
	for _, sub := range root.Commands() {
		if sub.Name() == "completion" {
			sub.Args, sub.RunE = groupArgs, groupRun
		}
	}
	return root
}

// groupArgs refuses an unknown verb of a resource (or an unknown resource)
// with cobra's suggestions, instead of printing help and exiting 0.
func groupArgs(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	if cmd.SuggestionsMinimumDistance <= 0 {
		cmd.SuggestionsMinimumDistance = 2
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
	if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
		msg += "; did you mean " + strings.Join(s, " or ") + "?"
	}
	return &usageError{msg: msg + "\n" + availableCommands(cmd)}
}

// groupRun answers a resource given without a verb.
func groupRun(cmd *cobra.Command, _ []string) error {
	return &usageError{msg: fmt.Sprintf("%q needs a command\n%s", cmd.CommandPath(), availableCommands(cmd))}
}

func availableCommands(cmd *cobra.Command) string {
	var names []string
	for _, s := range cmd.Commands() {
		if s.IsAvailableCommand() {
			names = append(names, s.Name())
		}
	}
	return "available: " + strings.Join(names, ", ")
}

// action wraps a command's body: from here on errors are the API's or the
// network's, not the command line's.
func (c *cli) action(fn func(cmd *cobra.Command, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		c.running = true
		return fn(cmd, args)
	}
}

// exactArgs is cobra.ExactArgs with a message that names what is missing.
func exactArgs(what ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != len(what) {
			return usagef("%s needs %s (got %d arguments)", cmd.CommandPath(), strings.Join(what, " and "), len(args))
		}
		return nil
	}
}

// api builds the client on first use: only commands that call the control
// plane need its URL and a token.
func (c *cli) api() (*adminapi.ClientWithResponses, error) {
	if c.client != nil {
		return c.client, nil
	}
	url := strings.TrimRight(c.url, "/")
	if url == "" {
		return nil, usagef("no control plane URL: set KECE_ADMIN_URL or pass --url http(s)://HOST:PORT")
	}
	if !strings.HasPrefix(url, "http://") && !strings.HasPrefix(url, "https://") {
		return nil, usagef("control plane URL %q must start with http:// or https://", url)
	}
	c.url = url
	token, err := c.token()
	if err != nil {
		return nil, err
	}
	cl, err := adminapi.NewClientWithResponses(url,
		adminapi.WithHTTPClient(&http.Client{Timeout: RequestTimeoutDefault}),
		adminapi.WithRequestEditorFn(func(_ context.Context, req *http.Request) error {
			req.Header.Set("Authorization", "Bearer "+token)
			req.Header.Set("User-Agent", "kecectl/"+buildinfo.Version())
			return nil
		}))
	if err != nil {
		return nil, usagef("bad control plane URL %q: %v", url, err)
	}
	c.client = cl
	return cl, nil
}

// token reads --token-file (which KECE_ADMIN_TOKEN_FILE sets), then
// KECE_ADMIN_TOKEN.
func (c *cli) token() (string, error) {
	file, from := c.tokenFile, "--token-file (or KECE_ADMIN_TOKEN_FILE)"
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return "", usagef("cannot read %s: %v", from, err)
		}
		if t := strings.TrimSpace(string(b)); t != "" {
			return t, nil
		}
		return "", usagef("%s %s is empty", from, file)
	}
	if t := c.getenv("KECE_ADMIN_TOKEN"); t != "" {
		return t, nil
	}
	return "", usagef("no admin token: set KECE_ADMIN_TOKEN or KECE_ADMIN_TOKEN_FILE, or pass --token-file FILE " +
		"(create one with: kece-control token create --kind admin --name NAME)")
}

// apiResponse is what every generated response offers.
type apiResponse interface{ StatusCode() int }

// result turns a call into an error unless the status is want: the API's
// code and message, plus what to do about it. r is a generated *…Response;
// its raw Body is read by reflection (the generated types share the field,
// not a method).
func (c *cli) result(r apiResponse, err error, want int) error {
	if err != nil {
		if c.ctx.Err() != nil {
			return c.ctx.Err()
		}
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
		return "the node still runs jobs; 'kecectl node drain NODE --wait [--deadline 10m]', or pass --force with a --reason"
	case "CHECK_REQUIRED":
		return "run 'kecectl node verify NODE --wait' first"
	case "HEARTBEAT_STALE":
		return "the node process must be running and heartbeating; check it on its host"
	case "CHECK_IN_PROGRESS":
		return "a self-check is already queued or running; watch it with 'kecectl node show NODE'"
	case "NODE_ALREADY_JOINED":
		return "the node holds a credential; use 'kecectl node rotate NODE' to issue a new join code"
	case "NODE_REVOKED":
		return "a revoked node cannot come back; register a new node"
	case "ADDRESS_NOT_ALLOWED":
		return "the address is outside the control plane's probe allowlist (hosts, CIDRs, ports)"
	case "JOB_NOT_CURRENT":
		return "a newer generation exists; rejudge that one ('kecectl job list --type TYPE')"
	case "EVENT_NOT_DEAD":
		return "only events in state DEAD are redelivered; see 'kecectl events dead'"
	case "CONSUMER_GROUP_UNKNOWN":
		return "a group exists once a business token joins it: 'kecectl token create --name N --consumer-group GROUP' (or use default)"
	case "WEBHOOK_GROUP_NOT_FOUND":
		return "the group has no webhook yet: 'kecectl webhook set GROUP --endpoint URL'; see 'kecectl webhook list'"
	case "WEBHOOK_KEY_MISSING":
		return "the control plane has no encryption key: set KECE_WEBHOOK_KEY_FILE (kece-control webhook-key new) on every replica and restart"
	case "WEBHOOK_URL_INVALID":
		return "give an absolute http:// or https:// URL without user:password"
	case "WEBHOOK_SECRET_INVALID":
		return "the secret file must hold whsec_ + base64 of at least 16 bytes (kece-control webhook-secret new prints one)"
	}
	return ""
}

// nodeVerb opens every audited node verb: the reason is given (checked
// before anything needs the server), the node resolved by name or id, and
// the client ready (nodeRef built it).
func (c *cli) nodeVerb(reason, arg string) (string, *adminapi.ClientWithResponses, error) {
	if err := needReason(reason); err != nil {
		return "", nil, err
	}
	id, err := c.nodeRef(arg)
	if err != nil {
		return "", nil, err
	}
	api, err := c.api()
	return id, api, err
}

func needReason(reason string) error {
	if strings.TrimSpace(reason) == "" {
		return usagef("--reason is required: say why (it is written to the audit log)")
	}
	return nil
}
