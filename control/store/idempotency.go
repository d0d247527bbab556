package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/kece-oj/kece/control/internal/jobdb"
)

// ErrIdempotencyKeyReused: an Idempotency-Key was used before, by the same
// caller, with a different request. It matches ErrConflict too.
var ErrIdempotencyKeyReused error = &ConflictError{Reason: "idempotency key was used with a different request"}

// MaxIdempotencyKeyLen is the longest accepted Idempotency-Key.
const MaxIdempotencyKeyLen = 128

func validIdempotencyKey(key string) bool {
	if len(key) == 0 || len(key) > MaxIdempotencyKeyLen {
		return false
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 0x21 || key[i] > 0x7e {
			return false
		}
	}
	return true
}

// idempotencyDigest covers everything the caller sent, the submission
// identity included (the job's request digest does not need it).
func idempotencyDigest(req EnqueueRequest) (string, error) {
	b, err := json.Marshal(req)
	if err != nil {
		return "", fmt.Errorf("store: idempotency digest: %w", err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// enqueueIdempotent is Enqueue behind an Idempotency-Key scoped to one API
// caller (tokenID). The first request with a key enqueues (or finds the
// identical existing submission) and records the key with its job in the same
// transaction; a later request with the same key and the same body gets the
// same job back, whatever the submission has become since; the same key with
// a different body is ErrIdempotencyKeyReused and writes nothing. An empty
// key is plain Enqueue.
//
// The key row is the first lock the transaction takes (key → pointer → job;
// no other path locks keys), so concurrent requests with one key are
// serialised on the key before any of them looks at the submission: the
// loser always sees the winner's key and answers by the key (the same job,
// or ErrIdempotencyKeyReused), never by the state the winner left on the
// submission (which would be a timing-dependent ErrConflict).
func (s *core) enqueueIdempotent(ctx context.Context, tokenID int64, key string, req EnqueueRequest) (EnqueueResult, error) {
	if key == "" {
		return s.enqueue(ctx, req)
	}
	if !validIdempotencyKey(key) {
		return EnqueueResult{}, jobdb.Invalid("Idempotency-Key", "must be 1..%d printable ASCII characters", MaxIdempotencyKeyLen)
	}
	reqDigest, err := idempotencyDigest(req)
	if err != nil {
		return EnqueueResult{}, err
	}
	pool, snapshot, digest, needs, err := s.validateEnqueue(ctx, req)
	if err != nil {
		return EnqueueResult{}, err
	}
	var res EnqueueResult
	err = s.db.InTx(ctx, func(tx *sql.Tx) error {
		res = EnqueueResult{}
		// Claim the key: inserted with job 0 (a committed key never has
		// job 0) or, when it exists, locked. A request racing on this key
		// waits here until this transaction commits or rolls back.
		if _, err := tx.ExecContext(ctx,
			`INSERT INTO judge_idempotency_key (token_id, idem_key, request_digest, job_id) VALUES (?, ?, ?, 0)
			 ON DUPLICATE KEY UPDATE job_id = job_id`, tokenID, key, reqDigest); err != nil {
			return fmt.Errorf("store: idempotent enqueue: key: %w", err)
		}
		var have string
		var jobID int64
		if err := tx.QueryRowContext(ctx,
			`SELECT request_digest, job_id FROM judge_idempotency_key WHERE token_id = ? AND idem_key = ? FOR UPDATE`,
			tokenID, key).Scan(&have, &jobID); err != nil {
			return fmt.Errorf("store: idempotent enqueue: key: %w", err)
		}
		if jobID != 0 {
			if have != reqDigest {
				return fmt.Errorf("idempotency key %q: %w", key, ErrIdempotencyKeyReused)
			}
			res = EnqueueResult{JobID: jobID}
			if err := tx.QueryRowContext(ctx, `SELECT generation, state FROM judge_job WHERE id = ?`, jobID).
				Scan(&res.Generation, &res.State); err != nil {
				return fmt.Errorf("store: idempotent enqueue: job %d: %w", jobID, err)
			}
			return nil
		}
		// This transaction inserted the key: enqueue and record the job. A
		// refusal (conflict with the submission) rolls the key back too.
		res, err = s.enqueueLocked(ctx, tx, req, pool, snapshot, digest, needs)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx,
			`UPDATE judge_idempotency_key SET job_id = ? WHERE token_id = ? AND idem_key = ?`,
			res.JobID, tokenID, key); err != nil {
			return fmt.Errorf("store: idempotent enqueue: key: %w", err)
		}
		return nil
	})
	if err != nil {
		return EnqueueResult{}, err
	}
	if res.Created {
		s.db.NotifyJobs(pool, 1, needs.caps)
	}
	return res, nil
}

// bulkDigestPrefix keeps a bulk request's digest apart from any single
// request's, so one key cannot serve both.
const bulkDigestPrefix = "bulk\n"

// enqueueManyIdempotent is EnqueueMany behind an Idempotency-Key scoped to
// one API caller, with the rules of enqueueIdempotent: the first request
// enqueues and records the key with all its jobs (in request order) in the
// same transaction; the same key and body later gets those jobs back, with
// their state now; the same key with a different body (or a single
// enqueue's key) is ErrIdempotencyKeyReused and writes nothing.
func (s *core) enqueueManyIdempotent(ctx context.Context, tokenID int64, key string, reqs []EnqueueRequest) ([]EnqueueResult, error) {
	if !validIdempotencyKey(key) {
		return nil, jobdb.Invalid("Idempotency-Key", "must be 1..%d printable ASCII characters", MaxIdempotencyKeyLen)
	}
	jobs, err := s.validateMany(ctx, reqs)
	if err != nil {
		return nil, err
	}
	body, err := json.Marshal(reqs)
	if err != nil {
		return nil, fmt.Errorf("store: idempotency digest: %w", err)
	}
	sum := sha256.Sum256(append([]byte(bulkDigestPrefix), body...))
	reqDigest := hex.EncodeToString(sum[:])
	var out []EnqueueResult
	err = s.db.InTx(ctx, func(tx *sql.Tx) error {
		out = nil
		// The key first, as in enqueueIdempotent (key → pointer → job):
		// inserted with job 0 or, when it exists, locked.
		if _, err := tx.ExecContext(ctx,
			`INSERT INTO judge_idempotency_key (token_id, idem_key, request_digest, job_id) VALUES (?, ?, ?, 0)
			 ON DUPLICATE KEY UPDATE job_id = job_id`, tokenID, key, reqDigest); err != nil {
			return fmt.Errorf("store: idempotent enqueue: key: %w", err)
		}
		var have string
		var first int64
		var bulkIDs sql.NullString
		if err := tx.QueryRowContext(ctx,
			`SELECT request_digest, job_id, bulk_job_ids FROM judge_idempotency_key WHERE token_id = ? AND idem_key = ? FOR UPDATE`,
			tokenID, key).Scan(&have, &first, &bulkIDs); err != nil {
			return fmt.Errorf("store: idempotent enqueue: key: %w", err)
		}
		if first != 0 {
			if have != reqDigest || !bulkIDs.Valid {
				return fmt.Errorf("idempotency key %q: %w", key, ErrIdempotencyKeyReused)
			}
			var err error
			out, err = recordedJobs(ctx, tx, bulkIDs.String)
			return err
		}
		// All new is the common case; a duplicate rolls back to the
		// savepoint and takes the locking path in the same transaction.
		if _, err := tx.ExecContext(ctx, `SAVEPOINT bulk_new`); err != nil {
			return fmt.Errorf("store: idempotent enqueue: %w", err)
		}
		var err error
		out, err = s.enqueueManyTx(ctx, tx, jobs)
		if jobdb.IsDuplicate(err) {
			if _, err := tx.ExecContext(ctx, `ROLLBACK TO SAVEPOINT bulk_new`); err != nil {
				return fmt.Errorf("store: idempotent enqueue: %w", err)
			}
			out, err = s.enqueueManyLocked(ctx, tx, reqs, jobs)
		}
		if err != nil {
			return err
		}
		ids := make([]int64, len(out))
		for i, r := range out {
			ids[i] = r.JobID
		}
		idsJSON, err := json.Marshal(ids)
		if err != nil {
			return fmt.Errorf("store: idempotent enqueue: %w", err)
		}
		if _, err := tx.ExecContext(ctx,
			`UPDATE judge_idempotency_key SET job_id = ?, bulk_job_ids = ? WHERE token_id = ? AND idem_key = ?`,
			ids[0], string(idsJSON), tokenID, key); err != nil {
			return fmt.Errorf("store: idempotent enqueue: key: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	s.notifyCreated(jobs, out)
	return out, nil
}

// recordedJobs reads the jobs a bulk key recorded, in its order, as they
// are now (Created false: an earlier request made them).
func recordedJobs(ctx context.Context, tx *sql.Tx, idsJSON string) ([]EnqueueResult, error) {
	var ids []int64
	if err := json.Unmarshal([]byte(idsJSON), &ids); err != nil || len(ids) == 0 {
		return nil, fmt.Errorf("store: idempotent enqueue: recorded jobs %q: %v", idsJSON, err)
	}
	in, args := jobdb.InList(ids)
	byID := make(map[int64]EnqueueResult, len(ids))
	rows, err := tx.QueryContext(ctx, `SELECT id, generation, state FROM judge_job WHERE id IN (`+in+`)`, args...)
	if err != nil {
		return nil, fmt.Errorf("store: idempotent enqueue: recorded jobs: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var r EnqueueResult
		if err := rows.Scan(&r.JobID, &r.Generation, &r.State); err != nil {
			return nil, fmt.Errorf("store: idempotent enqueue: recorded jobs: %w", err)
		}
		byID[r.JobID] = r
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: idempotent enqueue: recorded jobs: %w", err)
	}
	out := make([]EnqueueResult, len(ids))
	for i, id := range ids {
		r, ok := byID[id]
		if !ok {
			return nil, fmt.Errorf("store: idempotent enqueue: recorded job %d is gone", id)
		}
		out[i] = r
	}
	return out, nil
}

// PurgeIdempotencyKeys deletes keys recorded more than olderThan ago, in
// batches, and returns how many were deleted. A purged key is free again.
func (s *Jobs) PurgeIdempotencyKeys(ctx context.Context, olderThan time.Duration) (int64, error) {
	if olderThan < time.Minute {
		return 0, jobdb.Invalid("olderThan", "must be at least a minute")
	}
	var total int64
	for {
		r, err := s.db.Pool.ExecContext(ctx,
			`DELETE FROM judge_idempotency_key WHERE created_at < NOW(6) - INTERVAL ? MICROSECOND LIMIT 1000`,
			jobdb.Micros(olderThan))
		if err != nil {
			return total, fmt.Errorf("store: purge idempotency keys: %w", err)
		}
		n, _ := r.RowsAffected()
		total += n
		if n < 1000 {
			return total, nil
		}
	}
}
