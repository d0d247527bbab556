package store

import "github.com/kece-oj/kece/control/lease"

// The aggregates a caller holds: each is a view over one Store (the shared
// database handle) with the operations of one part of the schema. A Store
// hands out its own (Store.Jobs, Store.Leases, …); NewJobs and the other
// constructors build one over a given Store (the lease engine has none: its
// batchers make concurrent calls share a commit, so a Store has exactly
// one). Every aggregate of one Store shares its pool, configuration, caches
// and batchers, so holding several costs nothing.

// Jobs is the job aggregate: submissions in (enqueue, its idempotent and
// bulk forms, EnqueueTx inside a business backend's transaction), rejudge
// and cancel, and the reads of jobs, attempts and submission status.
type Jobs struct{ *core }

// Leases is the lease engine (control/lease): claims (and the slot cycle),
// renewals, results, releases, expiry and drain deadlines, decorated with
// its metrics and wake-ups (lease.Observed). A Store builds one over its
// handle.
type Leases = lease.Observed

// Nodes is the fleet's configuration: host groups, nodes, their languages
// and self-checks.
type Nodes struct{ *core }

// Credentials is node identity: join codes, credentials, sessions and
// heartbeats.
type Credentials struct{ *core }

// Events is settlement events: their claim, ack and failure by consumers,
// listing and redelivery.
type Events struct{ *core }

// Manifests is test data: artifacts and manifests, each with its owner.
type Manifests struct{ *core }

// AuditLog is the audit trail: the records of changes and their reads.
type AuditLog struct{ *core }

// Tokens is API access: business and admin tokens and admin console
// sessions.
type Tokens struct{ *core }

// NewJobs returns the job aggregate over s.
func NewJobs(s *Store) *Jobs { return &Jobs{s.core} }

// NewNodes returns the node aggregate over s.
func NewNodes(s *Store) *Nodes { return &Nodes{s.core} }

// NewCredentials returns the credential aggregate over s.
func NewCredentials(s *Store) *Credentials { return &Credentials{s.core} }

// NewEvents returns the event aggregate over s.
func NewEvents(s *Store) *Events { return &Events{s.core} }

// NewManifests returns the manifest aggregate over s.
func NewManifests(s *Store) *Manifests { return &Manifests{s.core} }

// NewAuditLog returns the audit aggregate over s.
func NewAuditLog(s *Store) *AuditLog { return &AuditLog{s.core} }

// NewTokens returns the token aggregate over s.
func NewTokens(s *Store) *Tokens { return &Tokens{s.core} }

// aggregates are a Store's own aggregates, made once.
type aggregates struct {
	jobs        *Jobs
	nodes       *Nodes
	credentials *Credentials
	events      *Events
	manifestAgg *Manifests
	audit       *AuditLog
	tokens      *Tokens
}

func newAggregates(s *Store) aggregates {
	return aggregates{jobs: NewJobs(s), nodes: NewNodes(s), credentials: NewCredentials(s),
		events: NewEvents(s), manifestAgg: NewManifests(s), audit: NewAuditLog(s), tokens: NewTokens(s)}
}

// Jobs returns s's job aggregate.
func (s *Store) Jobs() *Jobs { return s.jobs }

// Leases returns s's lease engine.
func (s *Store) Leases() *Leases { return s.core.leases }

// Nodes returns s's node aggregate.
func (s *Store) Nodes() *Nodes { return s.nodes }

// Credentials returns s's credential aggregate.
func (s *Store) Credentials() *Credentials { return s.credentials }

// Events returns s's event aggregate.
func (s *Store) Events() *Events { return s.events }

// Manifests returns s's manifest aggregate.
func (s *Store) Manifests() *Manifests { return s.manifestAgg }

// AuditLog returns s's audit aggregate.
func (s *Store) AuditLog() *AuditLog { return s.audit }

// Tokens returns s's token aggregate.
func (s *Store) Tokens() *Tokens { return s.tokens }
