package store

// The store's vocabulary under its own names. The job database's shared
// vocabulary (errors, states, Config and its defaults, the observer and
// notifier interfaces) lives in control/internal/jobdb, beside the tools
// the store and the lease engine share; the lease engine's types live in
// control/lease. Business backends and the control plane keep writing
// store.X for each (CHANGELOG: nothing a caller names moved).

import (
	"context"

	"github.com/kece-oj/kece/control/internal/jobdb"
	"github.com/kece-oj/kece/control/lease"
)

// Shared vocabulary (control/internal/jobdb).
type (
	Config            = jobdb.Config
	Hooks             = jobdb.Hooks
	Notifier          = jobdb.Notifier
	JobNotifier       = jobdb.JobNotifier
	SettleNotifier    = jobdb.SettleNotifier
	ValidationError   = jobdb.ValidationError
	ConflictError     = jobdb.ConflictError
	Observer          = jobdb.Observer
	SettlementPayload = jobdb.SettlementPayload
	JobKind           = jobdb.JobKind
	JobState          = jobdb.JobState
	NodeState         = jobdb.NodeState
	NodeSession       = jobdb.NodeSession
)

// Defaults, kinds and states (control/internal/jobdb).
const (
	LeaseTTLDefault             = jobdb.LeaseTTLDefault
	MaxAttemptsDefault          = jobdb.MaxAttemptsDefault
	MaxUnstartedAttemptsDefault = jobdb.MaxUnstartedAttemptsDefault
	HeartbeatTTLDefault         = jobdb.HeartbeatTTLDefault
	BackoffBaseDefault          = jobdb.BackoffBaseDefault
	BackoffMaxDefault           = jobdb.BackoffMaxDefault
	ClaimBatchMaxDefault        = jobdb.ClaimBatchMaxDefault
	MaxSnapshotBytesDefault     = jobdb.MaxSnapshotBytesDefault
	TxRetriesDefault            = jobdb.TxRetriesDefault
	JoinCodeTTLDefault          = jobdb.JoinCodeTTLDefault
	JoinCodeTTLMax              = jobdb.JoinCodeTTLMax
	OfflineAfterDefault         = jobdb.OfflineAfterDefault
	ReapBatchDefault            = jobdb.ReapBatchDefault
	MaxResultBytesDefault       = jobdb.MaxResultBytesDefault
	CompleteBatchMaxDefault     = jobdb.CompleteBatchMaxDefault
	ClaimBatchCallsDefault      = jobdb.ClaimBatchCallsDefault
	BatchParallelDefault        = jobdb.BatchParallelDefault
	EnqueueParallelDefault      = jobdb.EnqueueParallelDefault
	BatchLingerDefault          = jobdb.BatchLingerDefault
	SettledEventType            = jobdb.SettledEventType
	PoolSignalSlots             = jobdb.PoolSignalSlots
	KindSubmission              = jobdb.KindSubmission
	KindCheck                   = jobdb.KindCheck
	StateQueued                 = jobdb.StateQueued
	StateRunning                = jobdb.StateRunning
	StateCompleted              = jobdb.StateCompleted
	StateFailed                 = jobdb.StateFailed
	StateCancelled              = jobdb.StateCancelled
	NodePendingVerification     = jobdb.NodePendingVerification
	NodeEnabled                 = jobdb.NodeEnabled
	NodeDraining                = jobdb.NodeDraining
	NodeDisabled                = jobdb.NodeDisabled
)

// Error classes (control/internal/jobdb; errors.go there says what each means).
var (
	ErrNotFound          = jobdb.ErrNotFound
	ErrValidation        = jobdb.ErrValidation
	ErrConflict          = jobdb.ErrConflict
	ErrLeaseLost         = jobdb.ErrLeaseLost
	ErrResultConflict    = jobdb.ErrResultConflict
	ErrJobCancelled      = jobdb.ErrJobCancelled
	ErrSuperseded        = jobdb.ErrSuperseded
	ErrUnauthenticated   = jobdb.ErrUnauthenticated
	ErrSessionSuperseded = jobdb.ErrSessionSuperseded
	ErrNodeRevoked       = jobdb.ErrNodeRevoked
	ErrJoinCodeExpired   = jobdb.ErrJoinCodeExpired
	ErrJoinCodeUsed      = jobdb.ErrJoinCodeUsed
	ErrUnknownLanguage   = jobdb.ErrUnknownLanguage
	ErrManifestMissing   = jobdb.ErrManifestMissing
	ErrManifestMismatch  = jobdb.ErrManifestMismatch
	ErrMemoryTooLow      = jobdb.ErrMemoryTooLow
	ErrCheckRequired     = jobdb.ErrCheckRequired
	ErrHeartbeatStale    = jobdb.ErrHeartbeatStale
	ErrUnavailable       = jobdb.ErrUnavailable
	ErrDatabase          = jobdb.ErrDatabase
)

// Classify returns err marked ErrUnavailable or ErrDatabase when its chain
// holds a database failure, and err unchanged otherwise (jobdb.Classify).
func Classify(err error) error { return jobdb.Classify(err) }

// WithCaller returns a context whose audit rows record addr as the caller's
// address (jobdb.WithCaller).
func WithCaller(ctx context.Context, addr string) context.Context { return jobdb.WithCaller(ctx, addr) }

// The lease engine's types (control/lease).
type (
	ClaimedJob       = lease.ClaimedJob
	CycleResult      = lease.CycleResult
	CycleOutcome     = lease.CycleOutcome
	ReapStats        = lease.ReapStats
	DrainExpiry      = lease.DrainExpiry
	ReleaseItem      = lease.ReleaseItem
	ReleaseState     = lease.ReleaseState
	ReleaseResult    = lease.ReleaseResult
	RenewItem        = lease.RenewItem
	RenewState       = lease.RenewState
	RenewResult      = lease.RenewResult
	Outcome          = lease.Outcome
	Result           = lease.Result
	VerdictResult    = lease.VerdictResult
	SubtaskResult    = lease.SubtaskResult
	CaseResult       = lease.CaseResult
	ErrorResult      = lease.ErrorResult
	Phases           = lease.Phases
	Disposition      = lease.Disposition
	CompleteResponse = lease.CompleteResponse
)

// The lease engine's constants (control/lease).
const (
	CycleMax                 = lease.CycleMax
	DrainDeadlineErrorCode   = lease.DrainDeadlineErrorCode
	AttemptExpired           = lease.AttemptExpired
	AttemptNodeSilent        = lease.AttemptNodeSilent
	AttemptReleased          = lease.AttemptReleased
	AttemptSessionReplaced   = lease.AttemptSessionReplaced
	NodeSilentErrorCode      = lease.NodeSilentErrorCode
	NodeRestartedErrorCode   = lease.NodeRestartedErrorCode
	NeverStartedErrorCode    = lease.NeverStartedErrorCode
	ReleaseDraining          = lease.ReleaseDraining
	ReleaseShuttingDown      = lease.ReleaseShuttingDown
	ReleaseInputsUnavailable = lease.ReleaseInputsUnavailable
	ReleaseDependencyDown    = lease.ReleaseDependencyDown
	RefusedLeaseLost         = lease.RefusedLeaseLost
	RefusedConflict          = lease.RefusedConflict
	RefusedCancelled         = lease.RefusedCancelled
	RefusedSuperseded        = lease.RefusedSuperseded
	RefusedSessionSuperseded = lease.RefusedSessionSuperseded
	RefusedRevoked           = lease.RefusedRevoked
	RefusedInvalid           = lease.RefusedInvalid
	RefusedNotFound          = lease.RefusedNotFound
	RefusedOther             = lease.RefusedOther
	ReleaseReleased          = lease.ReleaseReleased
	ReleaseLost              = lease.ReleaseLost
	RenewOK                  = lease.RenewOK
	RenewLost                = lease.RenewLost
	RenewCancelled           = lease.RenewCancelled
	OutcomeVerdict           = lease.OutcomeVerdict
	OutcomeError             = lease.OutcomeError
	Accepted                 = lease.Accepted
	AlreadyCommitted         = lease.AlreadyCommitted
)
