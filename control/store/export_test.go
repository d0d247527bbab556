package store

import (
	"context"
)

// JobSearchSQL, AuditSearchSQL and VerdictMixSQL are the statements the
// admin searches run, for the query-plan test; JobSearchSQL first turns the
// creation-time bounds into ids as ListJobs does.
func JobSearchSQL(ctx context.Context, s *Store, f JobFilter) (string, []any, error) {
	lo, hi, err := s.createdIDRange(ctx, f)
	if err != nil {
		return "", nil, err
	}
	q, args := jobSearchSQL(f, lo, hi)
	return q, args, nil
}

// AuditSearchSQL is ListAudit's statement.
func AuditSearchSQL(f AuditFilter) (string, []any) { return auditSearchSQL(f) }

// VerdictMixSQL is VerdictMix's statement.
const VerdictMixSQL = verdictMixSQL
