package store

import (
	"context"
	"database/sql"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/kece-oj/kece/control/internal/jobdb"
)

// Business tenancy (docs/business.md "Tenancy"): a business token may be
// scoped to submission types, and belongs to one settlement-event consumer
// group. Every settlement is written once per group whose tokens may see its
// type (insertSettlements), and each group's rows carry their own delivery
// state, so one backend acknowledging an event never takes it from another.

// DefaultConsumerGroup is the group of every token created without one, and
// of every token that existed before groups did. It always takes every
// submission type, as the single outbox did before.
const DefaultConsumerGroup = "default"

// MaxTokenSubmissionTypes bounds the types one token may be scoped to.
const MaxTokenSubmissionTypes = 32

// consumerGroupRE: lowercase like every other name the admin gives.
var consumerGroupRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)

// ValidConsumerGroup says whether name is a well-formed consumer group name.
func ValidConsumerGroup(name string) bool { return consumerGroupRE.MatchString(name) }

// reservedTypePrefix marks internal submission types (self-checks use
// KECE_CHECK); no token is ever scoped to one.
const reservedTypePrefix = "KECE_"

// IsReservedType says whether typ is an internal submission type (self-checks'
// KECE_CHECK): business callers may neither enqueue nor read one.
func IsReservedType(typ string) bool { return strings.HasPrefix(typ, reservedTypePrefix) }

// tokenScope is a validated scope of a token to issue.
type tokenScope struct {
	types []string // sorted and distinct; nil: every type
	group string
}

// column renders the scope's types as judge_api_token.submission_types.
func (sc tokenScope) column() any {
	if sc.types == nil {
		return nil
	}
	return strings.Join(sc.types, ",")
}

// tokenScopeOf validates the types and group of a token to issue.
func tokenScopeOf(spec TokenSpec) (tokenScope, error) {
	if spec.Kind != TokenBusiness {
		if len(spec.SubmissionTypes) > 0 || spec.ConsumerGroup != "" {
			return tokenScope{}, jobdb.Invalid("submissionTypes", "only business tokens have submission types and a consumer group")
		}
		return tokenScope{group: DefaultConsumerGroup}, nil
	}
	sc := tokenScope{group: spec.ConsumerGroup}
	if sc.group == "" {
		sc.group = DefaultConsumerGroup
	}
	if !consumerGroupRE.MatchString(sc.group) {
		return tokenScope{}, jobdb.Invalid("consumerGroup", "must match %s", consumerGroupRE)
	}
	if len(spec.SubmissionTypes) > MaxTokenSubmissionTypes {
		return tokenScope{}, jobdb.Invalid("submissionTypes", "at most %d types", MaxTokenSubmissionTypes)
	}
	for _, t := range spec.SubmissionTypes {
		switch {
		case !submissionTypeRE.MatchString(t):
			return tokenScope{}, jobdb.Invalid("submissionTypes", "%q must match %s", t, submissionTypeRE)
		case strings.HasPrefix(t, reservedTypePrefix):
			return tokenScope{}, jobdb.Invalid("submissionTypes", "%q: types starting with %s are reserved", t, reservedTypePrefix)
		}
	}
	if len(spec.SubmissionTypes) > 0 {
		sc.types = slices.Compact(slices.Sorted(slices.Values(spec.SubmissionTypes)))
	}
	return sc, nil
}

// parseTypeSet reads a submission_types column: NULL is every type (nil).
func parseTypeSet(v sql.NullString) []string {
	if !v.Valid {
		return nil
	}
	if v.String == "" {
		return []string{}
	}
	return strings.Split(v.String, ",")
}

// MaySee says whether the token may use submissions of type typ: enqueue,
// read, rejudge, cancel, and receive their settlement events.
func (t TokenIdentity) MaySee(typ string) bool {
	return t.SubmissionTypes == nil || slices.Contains(t.SubmissionTypes, typ)
}

// EventScope returns the part of the outbox the token consumes: its group's
// rows of the types it may see.
func (t TokenIdentity) EventScope() EventScope {
	return EventScope{Group: t.ConsumerGroup, Types: t.SubmissionTypes}
}

// EventScope is the part of the outbox one consumer works on: the rows of
// one consumer group, of the submission types the caller may see. The zero
// value is the default group, every type.
type EventScope struct {
	// Group is the consumer group; "" means DefaultConsumerGroup.
	Group string
	// Types, when not nil, restricts to these submission types.
	Types []string
}

func (sc EventScope) group() string {
	if sc.Group == "" {
		return DefaultConsumerGroup
	}
	return sc.Group
}

// where renders the scope as a WHERE fragment on judge_settlement_event,
// with its arguments.
func (sc EventScope) where() (string, []any) {
	q := ` consumer_group = ?`
	args := []any{sc.group()}
	if sc.Types != nil {
		if len(sc.Types) == 0 {
			return q + ` AND FALSE`, args
		}
		q += ` AND submission_type IN (` + strings.TrimSuffix(strings.Repeat("?, ", len(sc.Types)), ", ") + `)`
		for _, t := range sc.Types {
			args = append(args, t)
		}
	}
	return q, args
}

// lockConsumerGroup makes sure the group's row exists and locks it, so
// concurrent token changes in one group recompute its types one at a time.
func lockConsumerGroup(ctx context.Context, tx *sql.Tx, group string) error {
	if _, err := tx.ExecContext(ctx,
		`INSERT IGNORE INTO judge_consumer_group (name, submission_types) VALUES (?, '')`, group); err != nil {
		return fmt.Errorf("store: consumer group %q: %w", group, err)
	}
	var name string
	if err := tx.QueryRowContext(ctx, `SELECT name FROM judge_consumer_group WHERE name = ? FOR UPDATE`, group).Scan(&name); err != nil {
		return fmt.Errorf("store: consumer group %q: %w", group, err)
	}
	return nil
}

// refreshConsumerGroup sets a group's types to the union of its unrevoked
// business tokens' types (an expired token still counts: a rotation can
// give it a new expiry). A group with no such token takes no type until a
// token joins it again; its undelivered rows stay where they are. The
// default group always takes every type. The caller holds the group's lock.
func refreshConsumerGroup(ctx context.Context, tx *sql.Tx, group string) error {
	if group == DefaultConsumerGroup {
		return nil
	}
	sets, err := jobdb.QueryAll(ctx, tx, func(r jobdb.RowScanner) (sql.NullString, error) {
		var v sql.NullString
		return v, r.Scan(&v)
	}, `SELECT submission_types FROM judge_api_token
	    WHERE kind = 'BUSINESS' AND consumer_group = ? AND revoked_at IS NULL`, group)
	if err != nil {
		return fmt.Errorf("store: consumer group %q: %w", group, err)
	}
	var column any = ""
	var union []string
	for _, v := range sets {
		if !v.Valid {
			column = nil // a token of every type: the group takes every type
			break
		}
		union = append(union, parseTypeSet(v)...)
	}
	if column != nil {
		column = strings.Join(slices.Compact(slices.Sorted(slices.Values(union))), ",")
	}
	if _, err := tx.ExecContext(ctx,
		`UPDATE judge_consumer_group SET submission_types = ?, updated_at = NOW(6) WHERE name = ?`, column, group); err != nil {
		return fmt.Errorf("store: consumer group %q: %w", group, err)
	}
	return nil
}

// Test data belongs to tenants too: a manifest and an uploaded artifact
// carry the owner that published them (judge_manifest.owner,
// judge_artifact_owner; migration 00011), and a caller reads, references or
// enqueues against only what its Tenant may use. What a caller may not use
// answers exactly as what does not exist.
const (
	// sharedOwner owns test data every caller may use: everything published
	// before test data had owners, and the control plane's own (self-checks).
	sharedOwner = ""
	// everyTypeOwner owns what a token of every type published: only such
	// tokens may use it.
	everyTypeOwner = "*"
	// noTypeOwner owns what a token scoped to no type at all published
	// (not issued by the API; kept apart so it can never read as shared).
	noTypeOwner = "-"
)

// Tenant is a caller's reach over test data: the submission types of its
// business token. The zero value (Types nil) is every type, which may use
// every manifest and artifact: a token of every type, or a caller sharing
// the database (EnqueueTx) that holds no token.
type Tenant struct {
	// Types are sorted and distinct, as on the token; nil is every type.
	Types []string
}

// Tenant returns the token's reach over test data.
func (t TokenIdentity) Tenant() Tenant { return Tenant{Types: t.SubmissionTypes} }

// owner is the owner of test data t publishes.
func (t Tenant) owner() string {
	switch {
	case t.Types == nil:
		return everyTypeOwner
	case len(t.Types) == 0:
		return noTypeOwner
	}
	return strings.Join(t.Types, ",")
}

// mayUse says whether t may read, reference or enqueue against test data of
// owner: shared data, anything for every type, and otherwise data whose
// every type t holds — so nothing flows to a token narrower than the one
// that published it.
func (t Tenant) mayUse(owner string) bool {
	switch {
	case owner == sharedOwner, t.Types == nil:
		return true
	case owner == everyTypeOwner, owner == noTypeOwner:
		return false
	}
	for typ := range strings.SplitSeq(owner, ",") {
		if !slices.Contains(t.Types, typ) {
			return false
		}
	}
	return true
}
