package sqljudge

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/engine"
)

func TestSelectOrderedAndUnordered(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ordered := selectProblem("SELECT id, name FROM person ORDER BY salary DESC, id", true)
	b.requireVerdict(t, ordered, "SELECT id, name FROM person ORDER BY salary DESC, id", engine.StatusAccepted)
	v := b.requireVerdict(t, ordered, "SELECT id, name FROM person ORDER BY id", engine.StatusWrongAnswer)
	require.Contains(t, v.Message, "row 1: expected ('3', 'Cyd'), got ('1', 'Ada')")

	unordered := selectProblem("SELECT id, name FROM person WHERE dept = 'eng'", false)
	b.requireVerdict(t, unordered, "SELECT id, name FROM person WHERE dept = 'eng' ORDER BY id DESC", engine.StatusAccepted)
	v = b.requireVerdict(t, unordered, "SELECT id, name FROM person WHERE dept = 'eng' OR dept IS NULL", engine.StatusWrongAnswer)
	require.Contains(t, v.Message, "row order ignored")
	require.Equal(t, float64(0), v.Score)
	v = b.requireVerdict(t, unordered, "SELECT id, name FROM person WHERE salary > 1000;", engine.StatusAccepted)
	require.Equal(t, float64(v.MaxScore), v.Score)
	b.requireVerdict(t, unordered, "SELECT id FROM person WHERE dept = 'eng'", engine.StatusWrongAnswer)
	b.requireVerdict(t, unordered, "SELECT name, id FROM person WHERE dept = 'eng'", engine.StatusWrongAnswer)
}

func TestSelectColumnNamesAndFrozenExpected(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	p := selectProblem("", false)
	p.Reference = ""
	p.Expected = &engine.ResultSet{Columns: []string{"dept", "n"}, Types: []string{"VARCHAR(20)", "BIGINT"},
		Rows: rowsOf([]string{"eng", "2"}, []string{"ops", "1"}, []string{null, "1"})}
	p.CompareColumnNames = true
	b.requireVerdict(t, p, "SELECT dept, COUNT(*) AS n FROM person GROUP BY dept", engine.StatusAccepted)
	v := b.requireVerdict(t, p, "SELECT dept, COUNT(*) FROM person GROUP BY dept", engine.StatusWrongAnswer)
	require.Contains(t, v.Message, "column 2")
	p.CompareColumnNames = false
	b.requireVerdict(t, p, "SELECT dept, COUNT(*) FROM person GROUP BY dept", engine.StatusAccepted)
	// The NULL group is not the string 'NULL'.
	b.requireVerdict(t, p, "SELECT COALESCE(dept, 'NULL'), COUNT(*) FROM person GROUP BY dept", engine.StatusWrongAnswer)
}

func TestNullAndTypeNormalisation(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	p := selectProblem("", true)
	p.Reference = ""
	p.Expected = &engine.ResultSet{
		Columns: []string{"id", "salary", "ratio", "born"},
		Types:   []string{"INT", "DECIMAL(10,2)", "DOUBLE", "DATETIME"},
		Rows: rowsOf(
			[]string{"1", "1200.5", "0.1", "1990-01-02 03:04:05"},
			[]string{"2", "900", "0.2", null},
			[]string{"3", "1500", null, "1985-06-07 08:09:10.5"},
			[]string{"4", null, "0.3", "2000-12-31 23:59:59"},
		),
	}
	b.requireVerdict(t, p, "SELECT id, salary, ratio, born FROM person ORDER BY id", engine.StatusAccepted)
	// Other types, same values: DOUBLE arithmetic, integer salaries, decimal ids.
	b.requireVerdict(t, p, `SELECT CAST(id AS DECIMAL(5,1)), salary * 1.000, IF(ratio IS NULL, NULL, ratio * 3 / 3), born FROM person ORDER BY id`, engine.StatusAccepted)
	b.requireVerdict(t, p, `SELECT id, salary, CASE id WHEN 4 THEN 0.1 + 0.2 ELSE ratio END, born FROM person ORDER BY id`, engine.StatusAccepted)
	// NULL against 0 and against the empty string.
	b.requireVerdict(t, p, "SELECT id, COALESCE(salary, 0), ratio, born FROM person ORDER BY id", engine.StatusWrongAnswer)
	v := b.requireVerdict(t, p, "SELECT id, salary, ratio, COALESCE(born, '') FROM person ORDER BY id", engine.StatusWrongAnswer)
	require.Contains(t, v.Message, "row 2")
	// A real difference in the 4th decimal is not rounded away.
	b.requireVerdict(t, p, "SELECT id, salary + 0.001, ratio, born FROM person ORDER BY id", engine.StatusWrongAnswer)
}

func dmlProblem(verify ...engine.SQLVerification) *engine.SQLProblem {
	return &engine.SQLProblem{
		Kind: engine.SQLKindDML, Schema: peopleSchema, Seed: peopleSeed, Verification: verify,
		StatementTimeout: 2 * time.Second, MaxRows: 1000, MaxBytes: 1 << 20, AllowMultiStatements: true,
	}
}

func TestDMLVerified(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	names := engine.SQLVerification{Query: "SELECT id, name, dept FROM person", Ordered: false}

	t.Run("insert", func(t *testing.T) {
		ins := names
		ins.Expected = engine.ResultSet{Columns: []string{"id", "name", "dept"}, Rows: rowsOf(
			[]string{"1", "Ada", "eng"}, []string{"2", "Bob", "ops"}, []string{"3", "Cyd", "eng"}, []string{"4", "Dee", null}, []string{"5", "Eve", "ops"})}
		p := dmlProblem(ins)
		b.requireVerdict(t, p, "INSERT INTO person (id, name, dept) VALUES (5, 'Eve', 'ops')", engine.StatusAccepted)
		b.requireVerdict(t, p, "INSERT INTO person (id, name, dept) VALUES (5, 'Eve', 'eng')", engine.StatusWrongAnswer)
		// Uncommitted work is rolled back when the session ends.
		b.requireVerdict(t, p, "START TRANSACTION; INSERT INTO person (id, name, dept) VALUES (5, 'Eve', 'ops')", engine.StatusWrongAnswer)
		b.requireVerdict(t, p, "START TRANSACTION; INSERT INTO person (id, name, dept) VALUES (5, 'Eve', 'ops'); COMMIT", engine.StatusAccepted)
	})
	t.Run("update", func(t *testing.T) {
		upd := engine.SQLVerification{Query: "SELECT id, salary FROM person ORDER BY id", Ordered: true,
			Expected: engine.ResultSet{Columns: []string{"id", "salary"}, Rows: rowsOf(
				[]string{"1", "1320.55"}, []string{"2", "900"}, []string{"3", "1650"}, []string{"4", null})}}
		p := dmlProblem(upd)
		b.requireVerdict(t, p, "UPDATE person SET salary = salary * 1.1 WHERE dept = 'eng'", engine.StatusAccepted)
		v := b.requireVerdict(t, p, "UPDATE person SET salary = salary * 1.1", engine.StatusWrongAnswer)
		require.Contains(t, v.Message, "verification 1: ")
		require.Contains(t, v.Message, "row 2")
	})
	t.Run("delete with two verifications", func(t *testing.T) {
		left := engine.SQLVerification{Query: "SELECT COUNT(*) FROM person",
			Expected: engine.ResultSet{Columns: []string{"c"}, Rows: rowsOf([]string{"3"})}}
		gone := engine.SQLVerification{Query: "SELECT id FROM person WHERE dept IS NULL",
			Expected: engine.ResultSet{Columns: []string{"id"}}}
		p := dmlProblem(left, gone)
		b.requireVerdict(t, p, "DELETE FROM person WHERE dept IS NULL", engine.StatusAccepted)
		v := b.requireVerdict(t, p, "DELETE FROM person WHERE id = 2", engine.StatusWrongAnswer)
		require.Contains(t, v.Message, "verification 2: ")
	})
	t.Run("single statement problems refuse several", func(t *testing.T) {
		left := engine.SQLVerification{Query: "SELECT COUNT(*) FROM person",
			Expected: engine.ResultSet{Columns: []string{"c"}, Rows: rowsOf([]string{"3"})}}
		p := dmlProblem(left)
		p.AllowMultiStatements = false
		v := b.requireVerdict(t, p, "DELETE FROM person WHERE id = 4; SELECT 1", engine.StatusRuntimeError)
		require.Contains(t, v.Message, "single statement")
		b.requireVerdict(t, p, "DELETE FROM person WHERE id = 4;", engine.StatusAccepted)
	})
}

func TestTimeLimit(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	p := selectProblem("SELECT 1 AS x", true)
	p.StatementTimeout = 300 * time.Millisecond
	v := b.requireVerdict(t, p, "SELECT SLEEP(5) AS x", engine.StatusTimeLimitExceeded)
	require.Contains(t, v.Message, "time limit")
	// MariaDB interrupts BENCHMARK() at the limit without an error.
	b.requireVerdict(t, p, "SELECT BENCHMARK(4000000000, MD5('x')) + 1 AS x", engine.StatusTimeLimitExceeded)
	// The student resets the server-side limit: the watchdog's KILL QUERY still ends it.
	p.AllowMultiStatements = true
	b.requireVerdict(t, p, "SET SESSION max_statement_time = 0; SELECT SLEEP(5) AS x", engine.StatusTimeLimitExceeded)
	b.requireVerdict(t, p, "SET SESSION max_statement_time = 0; SELECT BENCHMARK(4000000000, MD5('x')) AS x", engine.StatusTimeLimitExceeded)
	// DML statements are limited too.
	d := dmlProblem(engine.SQLVerification{Query: "SELECT COUNT(*) FROM person",
		Expected: engine.ResultSet{Columns: []string{"c"}, Rows: rowsOf([]string{"4"})}})
	d.StatementTimeout = 300 * time.Millisecond
	b.requireVerdict(t, d, "UPDATE person SET name = 'x' WHERE SLEEP(2) = 0", engine.StatusTimeLimitExceeded)
}

func TestOutputLimit(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	p := selectProblem("SELECT 1 AS x", true)
	p.MaxRows = 10
	p.MaxBytes = 64
	b.requireVerdict(t, p, "SELECT a.id FROM person a, person b", engine.StatusOutputLimitExceeded)
	b.requireVerdict(t, p, "SELECT REPEAT('x', 65) AS x", engine.StatusOutputLimitExceeded)
	// A cartesian blow-up: OLE at the row cap (or TLE), never a judge hang.
	p.StatementTimeout = time.Second
	v, err := b.run(t, "blowup", p, "SELECT 1 FROM person a, person b, person c, person d, person e, person f, person g, person h, person i, person j, person k, person l")
	require.NoError(t, err)
	require.Contains(t, []engine.Status{engine.StatusOutputLimitExceeded, engine.StatusTimeLimitExceeded}, v.Status)
	b.requireNoLeftovers(t)
	// With ORDER BY nothing streams before the sort: the time limit stops it.
	v, err = b.run(t, "blowup-sorted", p, "SELECT a.id FROM person a, person b, person c, person d, person e, person f, person g, person h, person i, person j, person k, person l ORDER BY RAND()")
	require.NoError(t, err)
	require.Contains(t, []engine.Status{engine.StatusOutputLimitExceeded, engine.StatusTimeLimitExceeded}, v.Status)
	b.requireNoLeftovers(t)
}

// A student probing the server is refused (RE) or stopped (TLE/OLE), and
// nothing outside the temporary database changes.
func TestHostileStatements(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	canary := "kece_canary_" + randHex(t, 4)
	_, err := b.root.Exec("CREATE DATABASE `" + canary + "`")
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = b.root.Exec("DROP DATABASE IF EXISTS `" + canary + "`") })
	_, err = b.root.Exec("CREATE TABLE `" + canary + "`.t (x INT)")
	require.NoError(t, err)
	_, err = b.root.Exec("INSERT INTO `" + canary + "`.t VALUES (42)")
	require.NoError(t, err)
	var maxConns string
	require.NoError(t, b.root.QueryRow("SELECT @@GLOBAL.max_connections").Scan(&maxConns))
	outfile := filepath.Join(t.TempDir(), "out.txt")
	require.NoError(t, os.WriteFile(filepath.Join(t.TempDir(), "in.txt"), []byte("1\n"), 0o644))
	usersBefore := countStudentUnrelatedUsers(t, b)

	sel := selectProblem("SELECT id FROM person", false)
	sel.AllowMultiStatements = true
	dml := dmlProblem(engine.SQLVerification{Query: "SELECT COUNT(*) FROM person",
		Expected: engine.ResultSet{Columns: []string{"c"}, Rows: rowsOf([]string{"4"})}})
	cases := []struct {
		name string
		p    *engine.SQLProblem
		src  string
		want []engine.Status
	}{
		{"read another schema", sel, "SELECT x AS id FROM `" + canary + "`.t", []engine.Status{engine.StatusRuntimeError}},
		{"read mysql.user", sel, "SELECT User AS id FROM mysql.user", []engine.Status{engine.StatusRuntimeError}},
		{"write another schema", dml, "DELETE FROM `" + canary + "`.t", []engine.Status{engine.StatusRuntimeError}},
		{"drop another schema", dml, "DROP DATABASE `" + canary + "`", []engine.Status{engine.StatusRuntimeError}},
		{"drop own table", dml, "DROP TABLE person", []engine.Status{engine.StatusRuntimeError}},
		{"create user", dml, "CREATE USER 'evil'@'%' IDENTIFIED BY 'x'", []engine.Status{engine.StatusRuntimeError}},
		{"grant", dml, "GRANT ALL ON *.* TO CURRENT_USER()", []engine.Status{engine.StatusRuntimeError}},
		{"grant on own db", dml, "GRANT SELECT ON person TO 'root'@'127.0.0.1'", []engine.Status{engine.StatusRuntimeError}},
		{"load data infile", dml, "LOAD DATA INFILE '/etc/passwd' INTO TABLE person", []engine.Status{engine.StatusRuntimeError}},
		{"load data local infile", dml, "LOAD DATA LOCAL INFILE '/etc/passwd' INTO TABLE person", []engine.Status{engine.StatusRuntimeError}},
		{"select into outfile", sel, "SELECT id FROM person INTO OUTFILE '" + outfile + "'", []engine.Status{engine.StatusRuntimeError}},
		{"set global", sel, "SET GLOBAL max_connections = 3; SELECT id FROM person", []engine.Status{engine.StatusRuntimeError}},
		{"kill own connection", sel, "KILL CONNECTION CONNECTION_ID(); SELECT id FROM person", []engine.Status{engine.StatusRuntimeError}},
		{"long sleep", sel, "SELECT SLEEP(100) AS id", []engine.Status{engine.StatusTimeLimitExceeded}},
		{"cartesian blow-up", sel, "SELECT a.id FROM person a, person b, person c, person d, person e, person f, person g, person h, person i, person j, person k",
			[]engine.Status{engine.StatusTimeLimitExceeded, engine.StatusOutputLimitExceeded}},
		{"insert blow-up", dml, "INSERT INTO person (id) SELECT 1000 + a.id * 1000000 + b.id * 10000 + c.id * 100 + d.id FROM person a, person b, person c, person d WHERE SLEEP(0.01) = 0",
			[]engine.Status{engine.StatusWrongAnswer, engine.StatusTimeLimitExceeded}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v, err := b.run(t, "hostile-"+randHex(t, 3), c.p, c.src)
			require.NoError(t, err)
			t.Logf("%s: %s", v.Status, v.Message)
			require.Contains(t, c.want, v.Status, "message: %s", v.Message)
			require.NotContains(t, v.Message, "kju")
			require.NotContains(t, v.Message, "kjd")
			b.requireNoLeftovers(t)
		})
	}

	var x int
	require.NoError(t, b.root.QueryRow("SELECT x FROM `"+canary+"`.t").Scan(&x))
	require.Equal(t, 42, x)
	var after string
	require.NoError(t, b.root.QueryRow("SELECT @@GLOBAL.max_connections").Scan(&after))
	require.Equal(t, maxConns, after)
	require.NoFileExists(t, outfile)
	require.Equal(t, usersBefore, countStudentUnrelatedUsers(t, b))
	require.False(t, b.userExists(t, "evil"))
}

// countStudentUnrelatedUsers counts the server's accounts that are neither
// the executor's (kju…) nor those of tests running beside this one
// (testAccountPrefix), which come and go while it runs.
func countStudentUnrelatedUsers(t *testing.T, b *testBundle) int {
	t.Helper()
	var n int
	require.NoError(t, b.root.QueryRow("SELECT COUNT(*) FROM mysql.user WHERE User NOT LIKE 'kju%' AND LEFT(User, ?) <> ?",
		len(testAccountPrefix), testAccountPrefix).Scan(&n))
	return n
}

func TestREMessageIsScrubbed(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	p := selectProblem("SELECT id FROM person", false)
	v := b.requireVerdict(t, p, "SELECT nosuchcolumn FROM person", engine.StatusRuntimeError)
	require.Contains(t, v.Message, "ERROR 1054")
	require.Contains(t, v.Message, "nosuchcolumn")
	v = b.requireVerdict(t, p, "SELECT * FROM mysql.user", engine.StatusRuntimeError)
	require.Contains(t, v.Message, "'student'@'host'")
	require.NotContains(t, v.Message, "127.0.0.1")
	v = b.requireVerdict(t, p, "SELEC id FROM person", engine.StatusRuntimeError)
	require.NotContains(t, v.Message, "MariaDB")
	b.requireVerdict(t, p, "  -- only a comment\n", engine.StatusRuntimeError)
}

// Two jobs of one submission number but different submission types are two
// job ids: they run side by side in separate databases and accounts.
func TestTwoJobsSameSubmissionDifferentTypes(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	sel := selectProblem("SELECT id FROM person WHERE dept = 'eng'", false)
	dml := dmlProblem(engine.SQLVerification{Query: "SELECT COUNT(*) FROM person",
		Expected: engine.ResultSet{Columns: []string{"c"}, Rows: rowsOf([]string{"0"})}})
	// The subject is isolation, not timing: beside the Docker tests of a
	// full `make test` the sleeping statements overran the helpers' 2 s.
	sel.StatementTimeout, dml.StatementTimeout = 20*time.Second, 20*time.Second
	jobs := []struct {
		job  string
		p    *engine.SQLProblem
		src  string
		want engine.Status
	}{
		{"contest-42", sel, "SELECT id FROM person WHERE dept = 'eng' AND SLEEP(0.2) = 0", engine.StatusAccepted},
		{"practice-42", dml, "DELETE FROM person WHERE SLEEP(0.1) = 0", engine.StatusAccepted},
	}
	var wg sync.WaitGroup
	res := make([]engine.Verdict, len(jobs))
	errs := make([]error, len(jobs))
	for i, j := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			res[i], errs[i] = b.exec.Execute(ctx, engine.Task{JobID: j.job, LeaseEpoch: 1, Source: []byte(j.src), SQL: j.p,
				Cases: []engine.Case{{ID: "sql", Weight: 5}}}, engine.NoProgress)
		}()
	}
	wg.Wait()
	for i, j := range jobs {
		require.NoError(t, errs[i], j.job)
		require.Equal(t, j.want, res[i].Status, "%s: %s", j.job, res[i].Message)
		require.Equal(t, float64(5), res[i].Score)
		require.Len(t, res[i].Cases, 1)
		require.Equal(t, "sql", res[i].Cases[0].ID)
	}
	b.requireNoLeftovers(t)
}

func TestCancellationKillsStatementAndCleansUp(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	names := namesFor(b.node, "cancelled", 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	started := make(chan struct{})
	b.exec.hooks.studentStarted = func() { close(started) }
	type result struct {
		v   engine.Verdict
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := b.exec.Execute(ctx, engine.Task{JobID: "cancelled", LeaseEpoch: 1, Source: []byte("SELECT SLEEP(40) AS x"), SQL: sleepProblem()}, engine.NoProgress)
		done <- result{v, err}
	}()
	<-started
	require.Eventually(t, func() bool {
		var n int
		require.NoError(t, b.root.QueryRow("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE USER = ? AND INFO LIKE 'SELECT SLEEP%'", names.User).Scan(&n))
		return n == 1
	}, 20*time.Second, 10*time.Millisecond)
	cancel() // lease lost
	r := <-done
	require.Error(t, r.err)
	require.True(t, errors.Is(r.err, engine.ErrInfrastructure))
	require.Equal(t, engine.InfraCancelled, engine.ClassOf(r.err))
	// KILL ends the statement's thread asynchronously: the server drops it
	// from the process list shortly after the executor returned.
	require.Eventually(t, func() bool {
		var n int
		require.NoError(t, b.root.QueryRow("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE USER = ?", names.User).Scan(&n))
		return n == 0
	}, 5*time.Second, 10*time.Millisecond, "the killed session is gone")
	require.False(t, b.dbExists(t, names.DB))
	require.False(t, b.userExists(t, names.User))
	b.requireNoLeftovers(t)
}

func TestBrokenManifestIsInfrastructure(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	p := selectProblem("SELECT id FROM person", false)
	p.Schema = "CREATE TABLE person (id INT"
	_, err := b.run(t, "broken-ddl", p, "SELECT id FROM person")
	require.Equal(t, engine.InfraCorruptInput, engine.ClassOf(err))
	b.requireNoLeftovers(t)

	p = selectProblem("SELECT nosuch FROM person", false)
	_, err = b.run(t, "broken-ref", p, "SELECT id FROM person")
	require.Equal(t, engine.InfraCorruptInput, engine.ClassOf(err))
	b.requireNoLeftovers(t)

	p = selectProblem("", false) // invalid: no reference nor expected
	_, err = b.run(t, "invalid", p, "SELECT id FROM person")
	require.Equal(t, engine.InfraCorruptInput, engine.ClassOf(err))
	require.ErrorIs(t, err, ErrInvalidProblem)
}

func TestUnreachableServerIsInfrastructure(t *testing.T) {
	t.Parallel()
	rootDB(t) // the server must exist for the other tests; this one uses a closed port
	e, err := New(Config{AdminDSN: "root:pw-s3cret@tcp(127.0.0.1:1)/", NodeID: "unreachable"})
	require.NoError(t, err)
	defer e.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = e.Execute(ctx, engine.Task{JobID: "j", LeaseEpoch: 1, Source: []byte("SELECT 1"), SQL: selectProblem("SELECT 1", false)}, engine.NoProgress)
	require.Equal(t, engine.InfraJudgeDBUnreachable, engine.ClassOf(err))
	require.NotContains(t, err.Error(), "s3cret")
	_, err = e.SelfCheck(ctx)
	require.Equal(t, engine.InfraJudgeDBUnreachable, engine.ClassOf(err))
	_, err = e.Janitor(ctx, func(string, int64) bool { return false })
	require.Equal(t, engine.InfraJudgeDBUnreachable, engine.ClassOf(err))
}

func TestProgressReported(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	var mu sync.Mutex
	var got []engine.Progress
	sink := engine.ProgressFunc(func(p engine.Progress) { mu.Lock(); got = append(got, p); mu.Unlock() })
	v, err := b.exec.Execute(context.Background(), engine.Task{JobID: "progress", LeaseEpoch: 3, Source: []byte("SELECT id FROM person"),
		SQL: selectProblem("SELECT id FROM person", false)}, sink)
	require.NoError(t, err)
	require.Equal(t, engine.StatusAccepted, v.Status)
	require.Equal(t, []engine.Progress{{Phase: engine.PhaseJudging, CasesTotal: 1}, {Phase: engine.PhaseJudging, CasesDone: 1, CasesTotal: 1}}, got)
}

// More running jobs than admin connections: the watchdog's kills have their
// own pool, so every runaway statement is still stopped at its limit (a
// statement not killed would outlive the 30 s context and fail the job).
func TestWatchdogDoesNotStarveOnAdminPool(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *Config) { c.AdminMaxOpenConns = 2 })
	p := selectProblem("SELECT 1 AS x", true)
	p.StatementTimeout = 300 * time.Millisecond
	p.AllowMultiStatements = true
	const jobs = 6
	var wg sync.WaitGroup
	res := make([]engine.Verdict, jobs)
	errs := make([]error, jobs)
	for i := 0; i < jobs; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			res[i], errs[i] = b.exec.Execute(ctx, engine.Task{JobID: "starve-" + string(rune('a'+i)), LeaseEpoch: 1,
				Source: []byte("SET SESSION max_statement_time = 0; SELECT SLEEP(100) AS x"), SQL: p}, engine.NoProgress)
		}()
	}
	wg.Wait()
	for i := range res {
		require.NoError(t, errs[i])
		require.Equal(t, engine.StatusTimeLimitExceeded, res[i].Status)
	}
	b.requireNoLeftovers(t)
}

// A registry that cannot record resources is an infrastructure error, and
// nothing is created unrecorded.
func TestRegistryFailureIsInfrastructure(t *testing.T) {
	t.Parallel()
	root := rootDB(t)
	schema := "kece_test_badreg_" + randHex(t, 4)
	_, err := root.Exec("CREATE DATABASE `" + schema + "`")
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = root.Exec("DROP DATABASE IF EXISTS `" + schema + "`") })
	// A table of the registry's name the executor cannot write its rows to.
	_, err = root.Exec("CREATE TABLE `" + schema + "`.`resource` (kind VARCHAR(16) PRIMARY KEY)")
	require.NoError(t, err)

	b := setup(t, func(c *Config) { c.RegistrySchema = schema })
	v, err := b.run(t, "badreg", selectProblem("SELECT id FROM person", false), "SELECT id FROM person")
	require.Error(t, err)
	require.ErrorIs(t, err, engine.ErrInfrastructure)
	require.Empty(t, v.Status)
	names := namesFor(b.node, "badreg", 1)
	require.False(t, b.dbExists(t, names.DB))
	require.False(t, b.userExists(t, names.User))
}

func TestSubmissionAndTaskLimits(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *Config) { c.MaxSourceBytes = 200; c.MaxStatements = 3; c.MaxStatementTimeout = 5 * time.Second })
	p := selectProblem("SELECT id FROM person", false)
	p.AllowMultiStatements = true
	v := b.requireVerdict(t, p, "SELECT id FROM person WHERE name <> '"+string(make([]byte, 200))+"'", engine.StatusRuntimeError)
	require.Contains(t, v.Message, "larger than 200 bytes")
	v = b.requireVerdict(t, p, "SET @a = 1; SET @b = 2; SET @c = 3; SELECT id FROM person", engine.StatusRuntimeError)
	require.Contains(t, v.Message, "at most 3")
	// The last result set answers a SELECT problem.
	b.requireVerdict(t, p, "SELECT 1; SET @x = 0; SELECT id FROM person", engine.StatusAccepted)
	v = b.requireVerdict(t, p, "SET @x = 1", engine.StatusWrongAnswer)
	require.Contains(t, v.Message, "no result set")

	p.StatementTimeout = 10 * time.Second // over this node's ceiling
	_, err := b.run(t, "ceiling", p, "SELECT id FROM person")
	require.Equal(t, engine.InfraCorruptInput, engine.ClassOf(err))

	ctx := context.Background()
	_, err = b.exec.Execute(ctx, engine.Task{NodeID: "someone-else", JobID: "j", LeaseEpoch: 1, Source: []byte("SELECT 1"),
		SQL: selectProblem("SELECT 1", false)}, nil)
	require.Equal(t, engine.InfraConfig, engine.ClassOf(err))
	_, err = b.exec.Execute(ctx, engine.Task{JobID: "", LeaseEpoch: 1, Source: []byte("SELECT 1"), SQL: selectProblem("SELECT 1", false)}, nil)
	require.Equal(t, engine.InfraCorruptInput, engine.ClassOf(err))
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = b.exec.Execute(cctx, engine.Task{JobID: "j", LeaseEpoch: 1, Source: []byte("SELECT 1"), SQL: selectProblem("SELECT 1", false)}, nil)
	require.Equal(t, engine.InfraCancelled, engine.ClassOf(err))
	b.requireNoLeftovers(t)
}

// A verdict says where the job's time went: the database, account, setup
// and the student's session as the sandbox, the statements as the run,
// the comparison (SELECT) or verification (DML) as the check. No compile.
// A submission refused before any statement runs has a sandbox only.
func TestVerdictPhases(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	sel := b.requireVerdict(t, selectProblem("SELECT id, name FROM person WHERE dept = 'eng'", false),
		"SELECT id, name FROM person WHERE dept = 'eng'", engine.StatusAccepted)
	left := engine.SQLVerification{Query: "SELECT COUNT(*) FROM person", Expected: engine.ResultSet{Columns: []string{"c"}, Rows: rowsOf([]string{"3"})}}
	dml := b.requireVerdict(t, dmlProblem(left), "DELETE FROM person WHERE dept IS NULL", engine.StatusAccepted)
	for _, v := range []engine.Verdict{sel, dml} {
		ph := v.Phases
		require.Positive(t, ph.Sandbox)
		require.Positive(t, ph.Run)
		require.Positive(t, ph.Check)
		require.Zero(t, ph.Compile)
		require.Zero(t, ph.Checker)
	}
	empty := b.requireVerdict(t, dmlProblem(left), "-- nothing", engine.StatusRuntimeError)
	require.Positive(t, empty.Phases.Sandbox)
	require.Zero(t, empty.Phases.Run)
	require.Zero(t, empty.Phases.Check)
}
