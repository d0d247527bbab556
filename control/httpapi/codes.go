package httpapi

// The one table of surface error codes. Every code an answer carries is a
// constant here, and errorCodes says on which surfaces it may appear. The
// table is the contracts' three ErrorCode enums (admin.yaml, business.yaml,
// machine.yaml) written once: codes_test.go fails when a contract lists a
// code the table does not give its surface, when the table gives a surface
// a code its contract does not list, and when a code is spelled as a string
// literal anywhere else in this package.

// The codes, in the order of first appearance in the machine, admin and
// business contracts.
const (
	codeRequestInvalid           = "REQUEST_INVALID"
	codeProtocolUnsupported      = "PROTOCOL_UNSUPPORTED"
	codeJoinCodeInvalid          = "JOIN_CODE_INVALID"
	codeJoinCodeExpired          = "JOIN_CODE_EXPIRED"
	codeJoinCodeUsed             = "JOIN_CODE_USED"
	codePoolMismatch             = "POOL_MISMATCH"
	codeCredentialInvalid        = "CREDENTIAL_INVALID"
	codeSessionInvalid           = "SESSION_INVALID"
	codeSessionSuperseded        = "SESSION_SUPERSEDED"
	codeNodeRevoked              = "NODE_REVOKED"
	codeNotFound                 = "NOT_FOUND"
	codeJobNotFound              = "JOB_NOT_FOUND"
	codeArtifactNotInManifest    = "ARTIFACT_NOT_IN_MANIFEST"
	codeArtifactMissing          = "ARTIFACT_MISSING"
	codeLeaseLost                = "LEASE_LOST"
	codeResultConflict           = "RESULT_CONFLICT"
	codeJobCancelled             = "JOB_CANCELLED"
	codeSuperseded               = "SUPERSEDED"
	codePayloadTooLarge          = "PAYLOAD_TOO_LARGE"
	codeResultInvalid            = "RESULT_INVALID"
	codeRateLimited              = "RATE_LIMITED"
	codeInternal                 = "INTERNAL"
	codeUnavailable              = "UNAVAILABLE"
	codeMethodNotAllowed         = "METHOD_NOT_ALLOWED"
	codeRequestTimeout           = "REQUEST_TIMEOUT"
	codeUnauthenticated          = "UNAUTHENTICATED"
	codeTokenExpired             = "TOKEN_EXPIRED"
	codeHostGroupNotFound        = "HOST_GROUP_NOT_FOUND"
	codeNodeNotFound             = "NODE_NOT_FOUND"
	codeEventNotFound            = "EVENT_NOT_FOUND"
	codeNameTaken                = "NAME_TAKEN"
	codeRevisionStale            = "REVISION_STALE"
	codeStateConflict            = "STATE_CONFLICT"
	codeNodeAlreadyJoined        = "NODE_ALREADY_JOINED"
	codeCheckRequired            = "CHECK_REQUIRED"
	codeCheckInProgress          = "CHECK_IN_PROGRESS"
	codeHeartbeatStale           = "HEARTBEAT_STALE"
	codeLeasesActive             = "LEASES_ACTIVE"
	codeJobNotCurrent            = "JOB_NOT_CURRENT"
	codeJobTerminal              = "JOB_TERMINAL"
	codeEventNotDead             = "EVENT_NOT_DEAD"
	codeNoAddress                = "NO_ADDRESS"
	codeAddressNotAllowed        = "ADDRESS_NOT_ALLOWED"
	codeConflict                 = "CONFLICT"
	codeManifestNotFound         = "MANIFEST_NOT_FOUND"
	codeSubmissionNotFound       = "SUBMISSION_NOT_FOUND"
	codeDigestMismatch           = "DIGEST_MISMATCH"
	codeManifestInvalid          = "MANIFEST_INVALID"
	codeArtifactSizeMismatch     = "ARTIFACT_SIZE_MISMATCH"
	codeLanguageUnsupported      = "LANGUAGE_UNSUPPORTED"
	codeManifestLanguageMismatch = "MANIFEST_LANGUAGE_MISMATCH"
	codeMemoryLimitTooLow        = "MEMORY_LIMIT_TOO_LOW"
	codeSubmissionConflict       = "SUBMISSION_CONFLICT"
	codeIdempotencyKeyReused     = "IDEMPOTENCY_KEY_REUSED"
	codeSubmissionTerminal       = "SUBMISSION_TERMINAL"
	codeCancelled                = "CANCELLED"
	codeTokenNotFound            = "TOKEN_NOT_FOUND"
	codeSubmissionTypeForbidden  = "SUBMISSION_TYPE_FORBIDDEN"
	codeWebhookURLInvalid        = "WEBHOOK_URL_INVALID"
	codeWebhookSecretInvalid     = "WEBHOOK_SECRET_INVALID"
	codeConsumerGroupUnknown     = "CONSUMER_GROUP_UNKNOWN"
	codeWebhookGroupNotFound     = "WEBHOOK_GROUP_NOT_FOUND"
	codeWebhookKeyMissing        = "WEBHOOK_KEY_MISSING"
)

// surfaceSet is a set of surfaces (bit i: surface i).
type surfaceSet uint8

const (
	onMachine  surfaceSet = 1 << surfaceMachine
	onAdmin    surfaceSet = 1 << surfaceAdmin
	onBusiness surfaceSet = 1 << surfaceBusiness
)

func (s surfaceSet) has(sf surface) bool { return s&(1<<sf) != 0 }

// errorCodes maps every code to the surfaces whose contract lists it. A code
// with no surface never reaches a client (codeCancelled: the client has
// gone; the code is logged and counted only). The control plane answers
// RATE_LIMITED on the business surface itself, when a token is over its
// budget (ratelimit.go); on the machine and admin surfaces only a proxy in
// front of it does, and clients expect it there for that reason. CONFLICT
// is listed by the contracts for clients to expect; the control plane
// itself answers with more specific codes.
var errorCodes = map[string]surfaceSet{
	codeRequestInvalid:           onMachine | onAdmin | onBusiness,
	codeProtocolUnsupported:      onMachine,
	codeJoinCodeInvalid:          onMachine,
	codeJoinCodeExpired:          onMachine,
	codeJoinCodeUsed:             onMachine,
	codePoolMismatch:             onMachine,
	codeCredentialInvalid:        onMachine,
	codeSessionInvalid:           onMachine,
	codeSessionSuperseded:        onMachine,
	codeNodeRevoked:              onMachine | onAdmin,
	codeNotFound:                 onMachine | onAdmin | onBusiness,
	codeJobNotFound:              onMachine | onAdmin,
	codeArtifactNotInManifest:    onMachine,
	codeArtifactMissing:          onMachine | onBusiness,
	codeLeaseLost:                onMachine,
	codeResultConflict:           onMachine,
	codeJobCancelled:             onMachine,
	codeSuperseded:               onMachine,
	codePayloadTooLarge:          onMachine | onAdmin | onBusiness,
	codeResultInvalid:            onMachine,
	codeRateLimited:              onMachine | onAdmin | onBusiness,
	codeInternal:                 onMachine | onAdmin | onBusiness,
	codeUnavailable:              onMachine | onAdmin | onBusiness,
	codeMethodNotAllowed:         onMachine | onAdmin | onBusiness,
	codeRequestTimeout:           onMachine | onAdmin | onBusiness,
	codeUnauthenticated:          onAdmin | onBusiness,
	codeTokenExpired:             onAdmin | onBusiness,
	codeHostGroupNotFound:        onAdmin,
	codeNodeNotFound:             onAdmin,
	codeEventNotFound:            onAdmin,
	codeNameTaken:                onAdmin,
	codeRevisionStale:            onAdmin,
	codeStateConflict:            onAdmin,
	codeNodeAlreadyJoined:        onAdmin,
	codeCheckRequired:            onAdmin,
	codeCheckInProgress:          onAdmin,
	codeHeartbeatStale:           onAdmin,
	codeLeasesActive:             onAdmin,
	codeJobNotCurrent:            onAdmin,
	codeJobTerminal:              onAdmin,
	codeEventNotDead:             onAdmin,
	codeNoAddress:                onAdmin,
	codeAddressNotAllowed:        onAdmin,
	codeConflict:                 onAdmin | onBusiness,
	codeManifestNotFound:         onBusiness,
	codeSubmissionNotFound:       onBusiness,
	codeDigestMismatch:           onBusiness,
	codeManifestInvalid:          onBusiness,
	codeArtifactSizeMismatch:     onBusiness,
	codeLanguageUnsupported:      onBusiness,
	codeManifestLanguageMismatch: onBusiness,
	codeMemoryLimitTooLow:        onBusiness,
	codeSubmissionConflict:       onBusiness,
	codeIdempotencyKeyReused:     onBusiness,
	codeSubmissionTerminal:       onBusiness,
	codeCancelled:                0,
	codeTokenNotFound:            onAdmin,
	codeSubmissionTypeForbidden:  onBusiness,
	codeWebhookURLInvalid:        onAdmin,
	codeWebhookSecretInvalid:     onAdmin,
	codeConsumerGroupUnknown:     onAdmin,
	codeWebhookGroupNotFound:     onAdmin,
	codeWebhookKeyMissing:        onAdmin,
}
