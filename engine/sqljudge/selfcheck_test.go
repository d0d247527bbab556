package sqljudge

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/engine"
)

func TestSelfCheckPasses(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rep, err := b.exec.SelfCheck(ctx)
	require.NoError(t, err)
	require.Contains(t, []Flavour{FlavourMariaDB, FlavourMySQL}, rep.Flavour)
	require.NotEmpty(t, rep.Version)
	require.NotEmpty(t, rep.Identity)
	b.requireNoLeftovers(t)
}

// The configured control server identity equals the judge server's: refuse.
func TestSelfCheckRefusesControlServerIdentity(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rep, err := b.exec.SelfCheck(ctx)
	require.NoError(t, err)

	same := setup(t, func(c *Config) { c.ControlServerIdentity = " " + rep.Identity + " " })
	_, err = same.exec.SelfCheck(ctx)
	require.ErrorIs(t, err, ErrControlDatabase)
	require.Equal(t, engine.InfraConfig, engine.ClassOf(err))
	_, err = same.exec.Execute(ctx, engine.Task{JobID: "j", LeaseEpoch: 1, Source: []byte("SELECT 1"), SQL: selectProblem("SELECT 1", false)}, engine.NoProgress)
	require.ErrorIs(t, err, ErrControlDatabase)
	same.requireNoLeftovers(t)

	differs := setup(t, func(c *Config) { c.ControlServerIdentity = "control-host:33061" })
	_, err = differs.exec.SelfCheck(ctx)
	require.NoError(t, err)
}

// A schema holding the control plane's marker table on the judge server means
// the DSN points at the control database: refuse. Not parallel: while the
// marker exists every executor of this package must refuse the server.
func TestSelfCheckRefusesControlMarker(t *testing.T) {
	b := setup(t, nil)
	schema := "kece_test_ctrl_" + randHex(t, 4)
	_, err := b.root.Exec("CREATE DATABASE `" + schema + "`")
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = b.root.Exec("DROP DATABASE IF EXISTS `" + schema + "`") })
	_, err = b.root.Exec("CREATE TABLE `" + schema + "`." + ControlMarkerTable + " (id INT)")
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err = b.exec.SelfCheck(ctx)
	require.ErrorIs(t, err, ErrControlDatabase)
	require.Contains(t, err.Error(), schema)
	_, err = b.exec.Execute(ctx, engine.Task{JobID: "j", LeaseEpoch: 1, Source: []byte("SELECT 1"), SQL: selectProblem("SELECT 1", false)}, engine.NoProgress)
	require.ErrorIs(t, err, ErrControlDatabase)
	_, err = b.exec.Janitor(ctx, func(string, int64) bool { return false })
	require.ErrorIs(t, err, ErrControlDatabase)
	b.requireNoLeftovers(t)

	_, err = b.root.Exec("DROP DATABASE `" + schema + "`")
	require.NoError(t, err)
	_, err = b.exec.SelfCheck(ctx)
	require.NoError(t, err)
}

// An admin account that cannot create accounts (or kill their queries) fails
// the self-check as a rights problem, never later as a user's verdict.
func TestSelfCheckRefusesMissingRights(t *testing.T) {
	t.Parallel()
	root := rootDB(t)
	// Same host as root's TCP sessions, so the weak account is the one matched.
	var host string
	require.NoError(t, root.QueryRow("SELECT SUBSTRING_INDEX(USER(), '@', -1)").Scan(&host))

	const lease = "CREATE, DROP, SELECT, INSERT, UPDATE, DELETE, SHOW VIEW, CREATE USER"
	cases := map[string]struct {
		grant string
		fails string // the step that must fail
	}{
		// Note: INSERT on mysql.* would allow CREATE USER, so this account
		// gets no data rights at all.
		"no create user": {"GRANT CREATE, DROP, PROCESS ON *.* TO %s", "create temporary account"},
		"no process":     {"GRANT " + lease + " ON *.* TO %s WITH GRANT OPTION", "PROCESS"},
		"no kill":        {"GRANT " + lease + ", PROCESS ON *.* TO %s WITH GRANT OPTION", "kill QUERY"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			user := testAccount(t, "weak")
			acct := account(user, host)
			_, err := root.Exec("CREATE USER " + acct + " IDENTIFIED BY 'weakpw'")
			require.NoError(t, err)
			t.Cleanup(func() { _, _ = root.Exec("DROP USER IF EXISTS " + acct) })
			_, err = root.Exec(sprintf(c.grant, acct))
			require.NoError(t, err)
			_, err = root.Exec("GRANT ALL ON `" + RegistrySchemaDefault + "`.* TO " + acct)
			require.NoError(t, err)

			b := setup(t, func(c *Config) { c.AdminDSN = user + ":weakpw@tcp(" + adminAddr(t) + ")/" })
			_, err = b.exec.SelfCheck(ctx)
			require.Error(t, err)
			t.Logf("self-check: %v", err)
			require.Equal(t, engine.InfraJudgeDBRights, engine.ClassOf(err), "%v", err)
			require.ErrorIs(t, err, ErrAdminRights)
			require.Contains(t, err.Error(), c.fails)
			require.NotContains(t, err.Error(), "weakpw")
			// The probe's own database and account are gone even so.
			b.requireNoLeftovers(t)
		})
	}
}

// The minimal admin account documented in docs/sql-engine.md passes the
// self-check and judges a DML problem.
func TestSelfCheckMinimalDocumentedGrants(t *testing.T) {
	t.Parallel()
	root := rootDB(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var host, version string
	require.NoError(t, root.QueryRow("SELECT SUBSTRING_INDEX(USER(), '@', -1), VERSION()").Scan(&host, &version))
	kill := "CONNECTION ADMIN"
	if !containsMariaDB(version) {
		kill = "CONNECTION_ADMIN"
	}
	user := testAccount(t, "weak")
	acct := account(user, host)
	_, err := root.Exec("CREATE USER " + acct + " IDENTIFIED BY 'minpw'")
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = root.Exec("DROP USER IF EXISTS " + acct) })
	_, err = root.Exec("GRANT CREATE, DROP, SELECT, INSERT, UPDATE, DELETE, SHOW VIEW, CREATE USER, PROCESS, " + kill + " ON *.* TO " + acct + " WITH GRANT OPTION")
	require.NoError(t, err)

	b := setup(t, func(c *Config) { c.AdminDSN = user + ":minpw@tcp(" + adminAddr(t) + ")/" })
	_, err = b.exec.SelfCheck(ctx)
	require.NoError(t, err)
	p := dmlProblem(engine.SQLVerification{Query: "SELECT COUNT(*) FROM person",
		Expected: engine.ResultSet{Columns: []string{"c"}, Rows: rowsOf([]string{"3"})}})
	b.requireVerdict(t, p, "DELETE FROM person WHERE id = 1", engine.StatusAccepted)
	p.StatementTimeout = 200 * time.Millisecond
	b.requireVerdict(t, p, "SET SESSION max_statement_time = 0; DELETE FROM person WHERE SLEEP(1) = 0", engine.StatusTimeLimitExceeded)
}

// A session whose client has closed can stay in the process list for a
// moment. An admin that may not kill it (a refused self-check's) waits for
// it to go rather than failing the cleanup and leaving the account's row
// behind; a session that stays is still an error.
func TestKillSessionsWithoutKillRightWaitsForClosedSession(t *testing.T) {
	t.Parallel()
	root := rootDB(t)
	var host string
	require.NoError(t, root.QueryRow("SELECT SUBSTRING_INDEX(USER(), '@', -1)").Scan(&host))
	weak := testAccount(t, "weak")
	_, err := root.Exec("CREATE USER " + account(weak, host) + " IDENTIFIED BY 'weakpw'")
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = root.Exec("DROP USER IF EXISTS " + account(weak, host)) })
	_, err = root.Exec("GRANT SELECT, PROCESS ON *.* TO " + account(weak, host))
	require.NoError(t, err)
	b := setup(t, func(c *Config) { c.AdminDSN = weak + ":weakpw@tcp(" + adminAddr(t) + ")/" })

	other := testAccount(t, "other")
	_, err = root.Exec("CREATE USER " + account(other, host) + " IDENTIFIED BY 'otherpw'")
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = root.Exec("DROP USER IF EXISTS " + account(other, host)) })
	session := func() *sql.DB {
		db, err := sql.Open("mysql", other+":otherpw@tcp("+adminAddr(t)+")/")
		require.NoError(t, err)
		require.NoError(t, db.Ping())
		return db
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// Closed while the cleanup waits: no error.
	closing := session()
	closed := time.AfterFunc(300*time.Millisecond, func() { closing.Close() })
	defer closed.Stop()
	start := time.Now()
	require.NoError(t, b.exec.killSessionsOf(ctx, other))
	require.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond)

	// Still open: the missing right is reported.
	open := session()
	defer open.Close()
	err = b.exec.killSessionsOf(ctx, other)
	require.ErrorIs(t, err, ErrAdminRights)
	require.Contains(t, err.Error(), "kill CONNECTION")
}
