// Package sqljudge is the executor of the mysql pool: it judges a student's
// SQL against a dedicated judge MySQL/MariaDB server, never the control
// plane's database.
//
// # What it owns
//
// Per lease (node id, job id, lease epoch) it creates a temporary database
// and a temporary account with rights on that database only (SELECT for
// SELECT problems; SELECT, INSERT, UPDATE, DELETE for DML problems; SHOW VIEW;
// never FILE, PROCESS, SUPER, GRANT or other schemas) and a connection budget
// (MAX_USER_CONNECTIONS). Every resource is recorded in a registry table on
// the judge server (Config.RegistrySchema, `kece_judge_registry.resource`:
// kind, name, host, node, job, lease epoch, created at) before it is created.
// The manifest's DDL and seed run as the admin account; the student's SQL runs
// as the temporary account, statement by statement, under the problem's
// statement time limit (MariaDB max_statement_time / MySQL
// max_execution_time, plus a watchdog KILL QUERY), with row and byte caps on
// every result set. Database and account are dropped on every path, on a
// context detached from the lease and bounded by Config.CleanupTimeout.
//
// # API for the worker
//
//	exec, err := sqljudge.New(sqljudge.Config{
//		AdminDSN: dsnFromCredentialFile, // never logged, never from a task
//		NodeID:   nodeID,
//		ControlServerIdentity: "", // optional: control DB's @@server_uuid or "hostname:port"
//	})
//	report, err := exec.SelfCheck(ctx)       // at start and on verify: reachable, not the control DB, rights
//	removed, err := exec.Janitor(ctx, isLive) // at start (before claiming) and periodically
//	verdict, err := exec.Execute(ctx, task, progress) // task.SQL set, task.Source = student SQL
//	exec.Close()
//
// Execute implements engine.Executor. task.Limits and task.Cases may be empty:
// a SQL task is one unit of score (the weight of its single case when the
// task lists exactly one case, which then carries the outcome; else 1).
// Cancelling ctx (lease lost) kills the running statement and cleans up; the
// error is then engine.InfraCancelled.
//
// Verdicts: AC; WA with a bounded diff of the first differing rows; TLE; RE
// with the server's message, bounded and scrubbed of account, database, host
// and path names; OLE when a result set passes the problem's row or byte cap.
// An unreachable server (JUDGE_DB_UNREACHABLE), missing admin rights
// (JUDGE_DB_RIGHTS), a registry failure, a broken manifest (CORRUPT_INPUT) or
// the control plane's server (CONFIG, errors.Is ErrControlDatabase) are
// infrastructure errors, never a user's verdict.
//
// ValidateProblem checks a frozen engine.SQLProblem; the control plane's
// manifest validation should apply the same rules at publish time.
//
// # What it must not touch
//
// No control-plane code, URLs or credentials, no Docker. On the judge server
// it only drops resources recorded in the registry under its own node id, and
// the janitor skips leases isLive reports live and leases running in this
// process. A server on which any schema holds the table
// `kece_control_marker` (created by the control plane's migrations), or
// whose identity equals Config.ControlServerIdentity, is refused.
package sqljudge
