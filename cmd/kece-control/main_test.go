package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/control/atrest"
	"github.com/kece-oj/kece/control/dbtest"
	"github.com/kece-oj/kece/control/ratelimit"
	"github.com/kece-oj/kece/control/store"
)

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// runIn runs one command line in-process and returns exit code, stdout, stderr.
func runIn(t *testing.T, env map[string]string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(context.Background(), args, &out, &errOut, envOf(env))
	return code, out.String(), errOut.String()
}

func writeSecret(t *testing.T, content string, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "secret")
	require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
	require.NoError(t, os.Chmod(p, mode))
	return p
}

type badSetting struct {
	env  map[string]string
	args []string
	want string
}

func badSettings(t *testing.T) []badSetting {
	worldReadable := writeSecret(t, "a@tcp(b)/c\n", 0o644)
	rawHook := writeSecret(t, "0123456789abcdef0123456789abcdef\n", 0o644)
	openKey := writeSecret(t, atrest.NewKeyText(), 0o644)
	notAKey := writeSecret(t, "whsec_MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=", 0o600)
	return []badSetting{
		{nil, []string{"serve", "--mysql-dsn", "a@tcp(b)/c"}, "KECE_ARTIFACT_DIR"},
		{nil, []string{"serve", "--artifact-dir", t.TempDir()}, "KECE_MYSQL_DSN"},
		{nil, []string{"serve", "--artifact-dir", t.TempDir(), "--listen", "nonsense", "--mysql-dsn", "x"}, "--listen: \"nonsense\" is not host:port"},
		{map[string]string{"KECE_LISTEN": "nonsense"}, []string{"serve", "--artifact-dir", t.TempDir(), "--mysql-dsn", "x"}, "KECE_LISTEN: \"nonsense\" is not host:port"},
		{nil, []string{"serve", "--artifact-dir", t.TempDir(), "--mysql-dsn", "root@tcp(127.0.0.1:1)/"}, "--mysql-dsn: the DSN names no database"},
		// Found before the (unreachable) database is tried.
		{nil, []string{"serve", "--artifact-dir", writeSecret(t, "not a directory", 0o600), "--mysql-dsn", "root@tcp(127.0.0.1:1)/kece"}, "--artifact-dir: "},
		{nil, []string{"token", "create", "--kind", "root", "--name", "x", "--mysql-dsn", "a@tcp(b)/c"}, "--kind must be admin or business"},
		{nil, []string{"token", "create", "--kind", "admin", "--mysql-dsn", "a@tcp(b)/c"}, "--name is required"},
		{nil, []string{"token", "fly"}, `unknown command "fly" for "kece-control token"`},
		{nil, []string{"token"}, "available: create, list, revoke, rotate"},
		{nil, []string{"migrate"}, `"kece-control migrate" needs a command`},
		{nil, []string{}, "say which command"},
		{nil, []string{"token", "list", "-o", "xml", "--mysql-dsn", "a@tcp(b)/c"}, `-output: "xml" is not an output format`},
		{nil, []string{"token", "rotate", "--kind", "admin", "--name", "x", "--overlap", "1000h", "--mysql-dsn", "a@tcp(b)/c"}, "--overlap: at most"},
		{nil, []string{"migrate", "sideways"}, `unknown command "sideways" for "kece-control migrate"`},
		{nil, []string{"frobnicate"}, "unknown command"},
		{nil, []string{"serve", "--artifact-dir", t.TempDir(), "--mysql-dsn", "a@tcp(b)/c", "--webhook-url", "https://oj.example/hook"}, "KECE_WEBHOOK_SECRET_FILE"},
		{nil, []string{"serve", "--artifact-dir", t.TempDir(), "--mysql-dsn", "a@tcp(b)/c", "--probe-allow-cidrs", "10.0.0.0/33"}, "--probe-allow-cidrs"},
		{nil, []string{"reconcile", "--format", "xml", "--mysql-dsn", "a@tcp(b)/c"}, "--format must be json or csv"},
		{nil, []string{"reconcile", "-o", "xml", "--mysql-dsn", "a@tcp(b)/c"}, "use one of json, yaml, table, csv"},
		{nil, []string{"serve", "--artifact-dir", t.TempDir(), "--mysql-dsn", "a@tcp(b)/c", "--webhook-url", "https://oj.example/hook", "--webhook-secret-file", "/nonexistent/secret"}, "--webhook-secret-file: /nonexistent/secret does not exist"},
		// A secret file others can read is refused with exit 2, so systemd
		// does not restart the unit in a loop.
		{map[string]string{"KECE_MYSQL_DSN_FILE": worldReadable}, []string{"migrate", "status"}, "KECE_MYSQL_DSN_FILE: " + worldReadable + " has mode 0644"},
		{map[string]string{"KECE_WEBHOOK_SECRET_FILE": rawHook, "KECE_WEBHOOK_URL": "https://oj.example/hook"}, []string{"serve", "--artifact-dir", t.TempDir(), "--mysql-dsn", "a@tcp(b)/c"}, "KECE_WEBHOOK_SECRET_FILE: " + rawHook + " has mode 0644"},
		{map[string]string{"KECE_MYSQL_DSN": "a@tcp(b)/c", "KECE_MYSQL_DSN_FILE": writeSecret(t, "x", 0o600)}, []string{"reconcile"}, "not both"},
		{map[string]string{"KECE_LEASE_TTL": "sixty"}, []string{"serve", "--artifact-dir", t.TempDir(), "--mysql-dsn", "a@tcp(b)/c"}, `KECE_LEASE_TTL: "sixty": not a duration`},
		{map[string]string{"KECE_MAX_ATTEMPTS": "0"}, []string{"serve", "--artifact-dir", t.TempDir(), "--mysql-dsn", "a@tcp(b)/c"}, "KECE_MAX_ATTEMPTS: 0 must be 1..100"},
		{map[string]string{"KECE_HEARTBEAT_TTL": "15s"}, []string{"serve", "--artifact-dir", t.TempDir(), "--mysql-dsn", "a@tcp(b)/c"}, "KECE_HEARTBEAT_TTL: 15s must be at least 1s and at least twice the heartbeat interval (10s)"},
		{map[string]string{"KECE_MAX_UNSTARTED_ATTEMPTS": "0"}, []string{"serve", "--artifact-dir", t.TempDir(), "--mysql-dsn", "a@tcp(b)/c"}, "KECE_MAX_UNSTARTED_ATTEMPTS: 0 must be 1..100"},
		{map[string]string{"KECE_DB_CONNS": "2"}, []string{"serve", "--artifact-dir", t.TempDir(), "--mysql-dsn", "a@tcp(b)/c"}, "KECE_DB_CONNS: 2 is too few"},
		{map[string]string{"KECE_LEASE_TTL": "10s", "KECE_RENEW_INTERVAL": "6s"}, []string{"serve", "--artifact-dir", t.TempDir(), "--mysql-dsn", "a@tcp(b)/c"}, "KECE_LEASE_TTL: 10s must be at least twice KECE_RENEW_INTERVAL"},
		{map[string]string{"KECE_WEBHOOK_SECRET": "short"}, []string{"webhook-secret", "show"}, "KECE_WEBHOOK_SECRET: line 1: webhook secret: shorter than 16 bytes"},
		{nil, []string{"serve", "--artifact-dir", t.TempDir(), "--mysql-dsn", "a@tcp(b)/c", "--log-format", "yaml"}, `log format "yaml": want json or text`},
		{nil, []string{"serve", "--artifact-dir", t.TempDir(), "--mysql-dsn", "a@tcp(b)/c", "--log-level", "loud"}, `log level "loud"`},
		{nil, []string{"serve", "--artifact-dir", t.TempDir(), "--mysql-dsn", "a@tcp(b)/c", "--metrics-listen", "9465"}, `--metrics-listen: "9465" is not host:port`},
		{map[string]string{"KECE_WEBHOOK_KEY_FILE": openKey}, []string{"serve", "--artifact-dir", t.TempDir(), "--mysql-dsn", "a@tcp(b)/c"}, "KECE_WEBHOOK_KEY_FILE: " + openKey + " has mode 0644"},
		{map[string]string{"KECE_WEBHOOK_KEY_FILE": notAKey}, []string{"serve", "--artifact-dir", t.TempDir(), "--mysql-dsn", "a@tcp(b)/c"}, `KECE_WEBHOOK_KEY_FILE: encryption key: must start with "kecekey_"`},
		{map[string]string{"KECE_WEBHOOK_OLD_KEY_FILE": writeSecret(t, atrest.NewKeyText(), 0o600)}, []string{"serve", "--artifact-dir", t.TempDir(), "--mysql-dsn", "a@tcp(b)/c"}, "KECE_WEBHOOK_OLD_KEY_FILE: an old key needs the new one"},
		{nil, []string{"webhook-key", "reencrypt", "--mysql-dsn", "a@tcp(b)/c"}, "KECE_WEBHOOK_KEY_FILE: no key configured"},
		{map[string]string{"KECE_METRICS_CACHE_TTL": "20m"}, []string{"serve", "--artifact-dir", t.TempDir(), "--mysql-dsn", "a@tcp(b)/c"}, "KECE_METRICS_CACHE_TTL: metrics: fleet cache TTL 20m0s must be 0..10m"},
		{map[string]string{"KECE_BUSINESS_RATE": "-1"}, []string{"serve", "--artifact-dir", t.TempDir(), "--mysql-dsn", "a@tcp(b)/c"}, "KECE_BUSINESS_RATE: -1 must be 0 (unlimited) or requests per second"},
		{nil, []string{"serve", "--artifact-dir", t.TempDir(), "--mysql-dsn", "a@tcp(b)/c", "--business-burst", "0"}, "--business-burst: 0 with rate 50 would refuse every request"},
		{nil, []string{"serve", "--artifact-dir", t.TempDir(), "--mysql-dsn", "a@tcp(b)/c", "--business-rate", "0"}, "KECE_BUSINESS_BURST (--business-burst): 100 with rate 0 (unlimited) means nothing: set burst 0, or a rate"},
		{map[string]string{"KECE_BUSINESS_RATE": "lots"}, []string{"serve", "--artifact-dir", t.TempDir(), "--mysql-dsn", "a@tcp(b)/c"}, `KECE_BUSINESS_RATE: "lots": not a number`},
	}
}

func TestBadSettingsAreRefusedWithAHint(t *testing.T) {
	t.Parallel()
	for _, c := range badSettings(t) {
		code, _, errOut := runIn(t, c.env, c.args...)
		require.Equal(t, 2, code, "%v: %s", c.args, errOut)
		require.Contains(t, errOut, c.want, c.args)
	}
}

// The same refusals from the binary as shipped: exit 2 (systemd's
// RestartPreventExitStatus=2 3), the setting named on stderr.
func TestBadSettingsExit2FromTheBuiltBinary(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	out, err := exec.Command("go", "build", "-o", dir+"/", ".").CombinedOutput()
	require.NoError(t, err, "%s", out)
	for _, c := range badSettings(t) {
		cmd := exec.Command(filepath.Join(dir, "kece-control"), c.args...)
		cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
		for k, v := range c.env {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		var stderr strings.Builder
		cmd.Stderr = &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		require.ErrorAs(t, err, &ee, "%v: %s", c.args, stderr.String())
		require.Equal(t, 2, ee.ExitCode(), "%v: %s", c.args, stderr.String())
		require.Contains(t, stderr.String(), c.want, c.args)
	}
}

// Every flag of every subcommand names its environment variable in --help
// (the settings loader refuses a flag without one).
func TestEveryFlagHasAVariable(t *testing.T) {
	t.Parallel()
	flagLine := regexp.MustCompile(`^\s*(-\w, )?--([a-z-]+)`)
	for _, args := range [][]string{{"serve"}, {"migrate", "up"}, {"reconcile"}, {"token", "create"}, {"token", "list"}, {"token", "rotate"}, {"token", "revoke"}, {"webhook-secret", "show"}} {
		code, out, errOut := runIn(t, nil, append(args, "--help")...)
		require.Equal(t, 0, code, errOut)
		_, flags, ok := strings.Cut(out, "\nFlags:\n")
		require.True(t, ok, "%v lists its flags:\n%s", args, out)
		flags, _, _ = strings.Cut(strings.TrimSpace(flags), "\n\n")
		n := 0
		for _, l := range strings.Split(flags, "\n") {
			m := flagLine.FindStringSubmatch(l)
			require.NotNil(t, m, "%v: %q", args, l)
			if m[2] == "help" {
				continue
			}
			n++
			require.Regexp(t, `\(env KECE_[A-Z0-9_]+\)`, l, "%v: --%s", args, m[2])
		}
		require.Positive(t, n, "%v lists its flags", args)
	}
}

// One run names every bad setting, the command line's included, before
// anything connects.
func TestServeReportsEveryBadSettingAtOnce(t *testing.T) {
	t.Parallel()
	code, _, errOut := runIn(t, map[string]string{"KECE_DB_CONNS": "2"}, "serve", "--lease-ttl=-1s", "--heartbeat-interval", "often",
		"--listen", "nonsense", "--log-format", "yaml", "--expires-in", "1d")
	require.Equal(t, 2, code, errOut)
	require.Contains(t, errOut, "unknown flag: --expires-in", "an unknown flag stops the parse")
	code, _, errOut = runIn(t, map[string]string{"KECE_DB_CONNS": "2"}, "serve", "--lease-ttl=-1s", "--heartbeat-interval", "often",
		"--listen", "nonsense", "--log-format", "yaml", "--reap-interval", "1d", "--business-rate", "-2", "--business-burst", "-1")
	require.Equal(t, 2, code, errOut)
	for _, want := range []string{`--lease-ttl: "-1s": must not be negative`, "--business-rate: -2 must be", "--business-burst: -1 must be 0..", `--heartbeat-interval: "often": not a duration`,
		`--listen: "nonsense" is not host:port`, `log format "yaml"`, "KECE_DB_CONNS: 2 is too few", "KECE_ARTIFACT_DIR"} {
		require.Contains(t, errOut, want)
	}
}

func TestMigrateTokenAndServe(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	db, dsn := dbtest.Open(t) // already migrated: migrate up is then a no-op
	// The DSN comes from a file, as systemd units give it.
	env := map[string]string{"KECE_MYSQL_DSN_FILE": writeSecret(t, dsn+"\n", 0o600)}
	code, out, errOut := runIn(t, env, "migrate", "up")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "up to date")
	code, out, errOut = runIn(t, env, "migrate", "status")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "00001_schema.sql")
	require.Contains(t, out, "00005_token_expiry_rotation.sql")
	require.Contains(t, out, "00008_business_tenancy.sql")
	require.Contains(t, out, "00010_admin_search.sql")

	// Down rolls back the newest migration, status shows it pending, up
	// brings it back (whichever migration is the newest).
	lines := strings.Split(strings.TrimSpace(out), "\n")
	newest := strings.Fields(lines[len(lines)-1])[1]
	require.Regexp(t, `^\d{5}_\w+\.sql$`, newest)
	code, out, errOut = runIn(t, env, "migrate", "down")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "rolled back "+newest)
	code, out, _ = runIn(t, env, "migrate", "status")
	require.Equal(t, 0, code)
	require.Regexp(t, `pending\s+`+regexp.QuoteMeta(newest), out)
	code, out, errOut = runIn(t, env, "migrate", "up")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "applied "+newest)

	code, out, errOut = runIn(t, env, "token", "create", "--kind", "admin", "--name", "ops")
	require.Equal(t, 0, code, errOut)
	tok := strings.TrimSpace(out)
	require.True(t, strings.HasPrefix(tok, "kat_"))
	var stored int
	require.NoError(t, db.QueryRow(`SELECT COUNT(*) FROM judge_api_token WHERE token_hash = ?`, tok).Scan(&stored))
	require.Zero(t, stored, "the token itself is never stored")
	code, out, errOut = runIn(t, env, "token", "create", "--kind", "business", "--name", "oj", "--expires-in", "720h")
	require.Equal(t, 0, code, errOut)
	biz := strings.TrimSpace(out)
	code, _, errOut = runIn(t, env, "token", "create", "--kind", "business", "--name", "old-oj")
	require.Equal(t, 0, code, errOut)
	// Tenancy: a token scoped to types, in a named consumer group.
	code, out, errOut = runIn(t, env, "token", "create", "--kind", "business", "--name", "algo",
		"--submission-types", "ALGO, DATABASE", "--consumer-group", "algo-backend")
	require.Equal(t, 0, code, errOut)
	scoped := strings.TrimSpace(out)
	code, _, errOut = runIn(t, env, "token", "create", "--kind", "business", "--name", "bad", "--submission-types", "algo")
	require.Equal(t, 2, code, "a bad type is a setting to fix")
	require.Contains(t, errOut, "submission-types")
	code, _, errOut = runIn(t, env, "token", "create", "--kind", "admin", "--name", "bad", "--consumer-group", "x")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "business tokens only")
	// A request budget of its own (rate limits); the same flags as kecectl.
	code, _, errOut = runIn(t, map[string]string{"KECE_MYSQL_DSN_FILE": env["KECE_MYSQL_DSN_FILE"], "KECE_TOKEN_BURST": "20"},
		"token", "create", "--kind", "business", "--name", "importer", "--rate", "5")
	require.Equal(t, 0, code, errOut)
	code, out, errOut = runIn(t, env, "token", "list", "--kind", "business")
	require.Equal(t, 0, code, errOut)
	require.Regexp(t, `(?m)^business\s+importer\s.*\s5/s burst 20$`, out)
	require.Regexp(t, `(?m)^business\s+algo\s.*\sdefault$`, out)
	code, _, errOut = runIn(t, env, "token", "create", "--kind", "business", "--name", "bad", "--rate", "5", "--burst", "0")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "--burst: 0 with rate 5 would refuse every request")
	code, _, errOut = runIn(t, env, "token", "create", "--kind", "business", "--name", "bad", "--rate", "5")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "--rate and --burst go together")
	code, _, errOut = runIn(t, env, "token", "revoke", "--kind", "business", "--name", "old-oj")
	require.Equal(t, 0, code, errOut)
	code, _, errOut = runIn(t, env, "token", "revoke", "--kind", "business", "--name", "old-oj")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "no live business token")

	// Rotate: a new secret on the same token, the old one valid for the overlap.
	code, out, errOut = runIn(t, env, "token", "rotate", "--kind", "business", "--name", "oj", "--overlap", "2h")
	require.Equal(t, 0, code, errOut)
	biz2 := strings.TrimSpace(out)
	require.True(t, strings.HasPrefix(biz2, "kbt_"))
	require.Contains(t, errOut, "stays valid for 2h0m0s")
	st, err := store.New(db, store.Config{})
	require.NoError(t, err)
	a, err := st.Tokens().AuthenticateToken(ctx, store.TokenBusiness, biz)
	require.NoError(t, err)
	b, err := st.Tokens().AuthenticateToken(ctx, store.TokenBusiness, biz2)
	require.NoError(t, err)
	require.Equal(t, a.ID, b.ID)
	sc, err := st.Tokens().AuthenticateToken(ctx, store.TokenBusiness, scoped)
	require.NoError(t, err)
	require.Equal(t, []string{"ALGO", "DATABASE"}, sc.SubmissionTypes)
	require.Equal(t, "algo-backend", sc.ConsumerGroup)

	// List: table and JSON, never a secret.
	code, out, errOut = runIn(t, env, "token", "list")
	require.Equal(t, 0, code, errOut)
	require.Regexp(t, `KIND\s+NAME\s+STATE\s+CREATED\s+LAST USED\s+EXPIRES`, out)
	require.Regexp(t, `business\s+oj\s+ROTATING`, out)
	require.Regexp(t, `business\s+old-oj\s+REVOKED`, out)
	require.Regexp(t, `business\s+algo\s+ACTIVE.*ALGO,DATABASE\s+algo-backend`, out)
	require.Regexp(t, `business\s+oj\s+ROTATING.*\*\s+default`, out)
	require.NotContains(t, out, "kbt_")
	code, out, errOut = runIn(t, env, "token", "list", "--kind", "business", "-o", "json")
	require.Equal(t, 0, code, errOut)
	var listed []store.TokenInfo
	require.NoError(t, json.Unmarshal([]byte(out), &listed))
	require.Len(t, listed, 4)
	require.Equal(t, "algo", listed[0].Name)
	require.Equal(t, []string{"ALGO", "DATABASE"}, listed[0].SubmissionTypes)
	require.Nil(t, listed[0].RateLimit, "the server's default")
	require.Equal(t, "importer", listed[1].Name)
	require.Equal(t, &ratelimit.Limit{Rate: 5, Burst: 20}, listed[1].RateLimit)
	require.Equal(t, "oj", listed[2].Name)
	require.NotNil(t, listed[2].ExpiresAt)
	require.NotNil(t, listed[2].LastUsedAt, "authenticated above")
	code, out, _ = runIn(t, env, "token", "list", "-o", "yaml")
	require.Equal(t, 0, code)
	require.Contains(t, out, "name: ops")

	// Reconcile: a healthy database exits 0; a planted violation exits 3 (as kecectl).
	code, out, errOut = runIn(t, env, "reconcile")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, `"violations": []`)
	code, out, _ = runIn(t, env, "reconcile", "-o", "table")
	require.Equal(t, 0, code)
	require.Contains(t, out, "rules hold")
	_, err = db.Exec(`INSERT INTO judge_submission (submission_type, submission_id, current_job_id, generation) VALUES ('ALGO', 'dangling', 999999, 1)`)
	require.NoError(t, err)
	code, out, errOut = runIn(t, env, "reconcile", "--format", "csv")
	require.Equal(t, 3, code, errOut)
	require.Contains(t, out, "POINTER_DANGLING")
	code, out, _ = runIn(t, env, "reconcile", "-o", "csv")
	require.Equal(t, 3, code)
	require.Contains(t, out, "POINTER_DANGLING")
	code, out, _ = runIn(t, env, "reconcile", "-o", "yaml")
	require.Equal(t, 3, code)
	require.Contains(t, out, "rule: POINTER_DANGLING")
	code, out, _ = runIn(t, env, "reconcile", "-o", "table")
	require.Equal(t, 3, code)
	require.Regexp(t, `POINTER_DANGLING\s+`, out)
	_, err = db.Exec(`DELETE FROM judge_submission WHERE submission_id = 'dangling'`)
	require.NoError(t, err)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	ln.Close()
	done := make(chan int, 1)
	var serveOut, serveErr bytes.Buffer
	// Every serve setting from the environment, as the systemd unit gives them.
	serveEnv := map[string]string{"KECE_MYSQL_DSN_FILE": env["KECE_MYSQL_DSN_FILE"], "KECE_LISTEN": addr,
		"KECE_ARTIFACT_DIR": t.TempDir(), "KECE_OFFLINE_AFTER": "20s", "KECE_MAX_ATTEMPTS": "4", "KECE_DB_CONNS": "8",
		"KECE_BUSINESS_RATE": "0.01", "KECE_BUSINESS_BURST": "2", "KECE_WEBHOOK_KEY_FILE": writeSecret(t, atrest.NewKeyText(), 0o640)}
	go func() {
		done <- run(ctx, []string{"serve"}, &serveOut, &serveErr, envOf(serveEnv))
	}()
	// Wait for /healthz, or for serve to end early (then its output says why).
	giveUp := time.After(60 * time.Second)
	for up := false; !up; {
		select {
		case code := <-done:
			t.Fatalf("serve exited %d before answering:\n%s", code, serveErr.String())
		case <-giveUp:
			t.Fatal("serve did not answer /healthz within 60s")
		case <-time.After(20 * time.Millisecond):
		}
		if resp, err := http.Get("http://" + addr + "/healthz"); err == nil {
			resp.Body.Close()
			up = resp.StatusCode == http.StatusOK
		}
	}
	req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("http://%s/api/v1/admin/judge-host-groups", addr), nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "the created admin token is accepted")
	resp, err = http.Get("http://" + addr + "/openapi/business.yaml")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "the specs are served")
	// The key file reaches the admin API through the replica: a webhook
	// group can be given a (generated) secret.
	req, _ = http.NewRequest(http.MethodPut, fmt.Sprintf("http://%s/api/v1/admin/webhook-groups/default", addr),
		strings.NewReader(`{"url":"https://oj.example/hook"}`))
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusCreated, resp.StatusCode, "KECE_WEBHOOK_KEY_FILE seals the new group's secret")
	// The replica limits business tokens with the default from its settings
	// (burst 2, then one every 100 s), or with the token's own budget.
	bizGet := func(token string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("http://%s/api/v1/submissions/ALGO/none", addr), nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode, resp.Header.Get("Retry-After")
	}
	for i, want := range []int{http.StatusNotFound, http.StatusNotFound, http.StatusTooManyRequests} {
		status, retry := bizGet(scoped)
		require.Equal(t, want, status, "request %d of a token on the default budget", i)
		if want == http.StatusTooManyRequests {
			require.Equal(t, "100", retry)
		}
	}
	code, out, errOut = runIn(t, env, "token", "create", "--kind", "business", "--name", "fast", "--rate", "100", "--burst", "10")
	require.Equal(t, 0, code, errOut)
	fast := strings.TrimSpace(out)
	for range 5 {
		status, _ := bizGet(fast)
		require.Equal(t, http.StatusNotFound, status, "a token's own budget wins over the default")
	}
	cancel()
	select {
	case code := <-done:
		require.Equal(t, 0, code, serveErr.String())
	case <-time.After(25 * time.Second):
		t.Fatal("serve did not stop on cancel")
	}
}

func TestWebhookSecretCommand(t *testing.T) {
	t.Parallel()
	code, out, errOut := runIn(t, nil, "webhook-secret", "new")
	require.Equal(t, 0, code, errOut)
	require.Regexp(t, `^whsec_[A-Za-z0-9+/]{43}=\n$`, out)

	// A raw secret written before the standard: show prints the whsec_ form
	// a receiver configures.
	raw := writeSecret(t, "0123456789abcdef0123456789abcdef\n", 0o640)
	code, out, errOut = runIn(t, map[string]string{"KECE_WEBHOOK_SECRET_FILE": raw}, "webhook-secret", "show")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "whsec_MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=\n", out)
	code, _, errOut = runIn(t, nil, "webhook-secret", "show")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "KECE_WEBHOOK_SECRET_FILE")
}
