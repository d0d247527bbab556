package sqljudge

import (
	"errors"
	"fmt"
	"strings"

	"github.com/kece-oj/kece/engine"
)

// ErrInvalidProblem is matched (errors.Is) by every error of ValidateProblem.
var ErrInvalidProblem = errors.New("invalid SQL problem")

// ValidateProblem refuses a frozen SQL problem that misses something the
// executor needs: DDL, the expected result (frozen or a reference query) for
// SELECT problems, verification queries with expected results for DML
// problems, a positive statement time limit and positive row and byte caps.
// The control plane's manifest validation mirrors these rules at publish time;
// the executor checks again so a bad manifest is an infrastructure error
// (CORRUPT_INPUT), never a user's verdict.
func ValidateProblem(p *engine.SQLProblem) error {
	if p == nil {
		return fmt.Errorf("%w: no SQL part", ErrInvalidProblem)
	}
	if strings.TrimSpace(p.Schema) == "" {
		return fmt.Errorf("%w: schema DDL is empty", ErrInvalidProblem)
	}
	if p.StatementTimeout <= 0 {
		return fmt.Errorf("%w: statement time limit must be positive", ErrInvalidProblem)
	}
	if p.MaxRows <= 0 || p.MaxBytes <= 0 {
		return fmt.Errorf("%w: row and byte caps must be positive", ErrInvalidProblem)
	}
	switch p.Kind {
	case engine.SQLKindSelect:
		hasRef := strings.TrimSpace(p.Reference) != ""
		if hasRef == (p.Expected != nil) {
			return fmt.Errorf("%w: a SELECT problem needs exactly one of a reference query or an expected result", ErrInvalidProblem)
		}
		if p.Expected != nil {
			if err := validateResultSet(*p.Expected, p.MaxRows); err != nil {
				return fmt.Errorf("%w: expected result: %w", ErrInvalidProblem, err)
			}
		}
		if len(p.Verification) > 0 {
			return fmt.Errorf("%w: a SELECT problem has no verification queries", ErrInvalidProblem)
		}
	case engine.SQLKindDML:
		if len(p.Verification) == 0 {
			return fmt.Errorf("%w: a DML problem needs at least one verification query", ErrInvalidProblem)
		}
		for i, v := range p.Verification {
			if strings.TrimSpace(v.Query) == "" {
				return fmt.Errorf("%w: verification %d: query is empty", ErrInvalidProblem, i)
			}
			if err := validateResultSet(v.Expected, p.MaxRows); err != nil {
				return fmt.Errorf("%w: verification %d: %w", ErrInvalidProblem, i, err)
			}
		}
		if p.Expected != nil || strings.TrimSpace(p.Reference) != "" {
			return fmt.Errorf("%w: a DML problem is verified by its verification queries only", ErrInvalidProblem)
		}
	default:
		return fmt.Errorf("%w: unknown kind %q (want SELECT or DML)", ErrInvalidProblem, p.Kind)
	}
	return nil
}

func validateResultSet(rs engine.ResultSet, maxRows int64) error {
	if len(rs.Columns) == 0 {
		return errors.New("no columns")
	}
	if len(rs.Types) != 0 && len(rs.Types) != len(rs.Columns) {
		return fmt.Errorf("%d types for %d columns", len(rs.Types), len(rs.Columns))
	}
	if int64(len(rs.Rows)) > maxRows {
		return fmt.Errorf("%d rows exceed the row cap %d", len(rs.Rows), maxRows)
	}
	for i, r := range rs.Rows {
		if len(r) != len(rs.Columns) {
			return fmt.Errorf("row %d has %d values for %d columns", i, len(r), len(rs.Columns))
		}
	}
	return nil
}
