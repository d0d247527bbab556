package httpapi

// Temporary: operations of adminapi not built yet answer 501. Each is moved to
// its real file when implemented; this file is deleted when empty.

import (
	"context"
	"errors"
	"net/http"

	"github.com/kece-oj/kece/contracts/adminapi"
)

var errNotImplementedadminAPI = apiErr(http.StatusNotImplemented, "NOT_IMPLEMENTED", errors.New("not implemented yet"))

// ListHostGroups is not implemented yet.
func (adminAPI) ListHostGroups(context.Context, adminapi.ListHostGroupsRequestObject) (adminapi.ListHostGroupsResponseObject, error) {
	return nil, errNotImplementedadminAPI
}

// CreateHostGroup is not implemented yet.
func (adminAPI) CreateHostGroup(context.Context, adminapi.CreateHostGroupRequestObject) (adminapi.CreateHostGroupResponseObject, error) {
	return nil, errNotImplementedadminAPI
}

// UpdateHostGroup is not implemented yet.
func (adminAPI) UpdateHostGroup(context.Context, adminapi.UpdateHostGroupRequestObject) (adminapi.UpdateHostGroupResponseObject, error) {
	return nil, errNotImplementedadminAPI
}

// ListJudgeJobs is not implemented yet.
func (adminAPI) ListJudgeJobs(context.Context, adminapi.ListJudgeJobsRequestObject) (adminapi.ListJudgeJobsResponseObject, error) {
	return nil, errNotImplementedadminAPI
}

// GetJudgeJob is not implemented yet.
func (adminAPI) GetJudgeJob(context.Context, adminapi.GetJudgeJobRequestObject) (adminapi.GetJudgeJobResponseObject, error) {
	return nil, errNotImplementedadminAPI
}

// CancelJudgeJob is not implemented yet.
func (adminAPI) CancelJudgeJob(context.Context, adminapi.CancelJudgeJobRequestObject) (adminapi.CancelJudgeJobResponseObject, error) {
	return nil, errNotImplementedadminAPI
}

// RejudgeJudgeJob is not implemented yet.
func (adminAPI) RejudgeJudgeJob(context.Context, adminapi.RejudgeJudgeJobRequestObject) (adminapi.RejudgeJudgeJobResponseObject, error) {
	return nil, errNotImplementedadminAPI
}

// ListJudgers is not implemented yet.
func (adminAPI) ListJudgers(context.Context, adminapi.ListJudgersRequestObject) (adminapi.ListJudgersResponseObject, error) {
	return nil, errNotImplementedadminAPI
}

// CreateJudger is not implemented yet.
func (adminAPI) CreateJudger(context.Context, adminapi.CreateJudgerRequestObject) (adminapi.CreateJudgerResponseObject, error) {
	return nil, errNotImplementedadminAPI
}

// GetJudger is not implemented yet.
func (adminAPI) GetJudger(context.Context, adminapi.GetJudgerRequestObject) (adminapi.GetJudgerResponseObject, error) {
	return nil, errNotImplementedadminAPI
}

// UpdateJudger is not implemented yet.
func (adminAPI) UpdateJudger(context.Context, adminapi.UpdateJudgerRequestObject) (adminapi.UpdateJudgerResponseObject, error) {
	return nil, errNotImplementedadminAPI
}

// DisableJudger is not implemented yet.
func (adminAPI) DisableJudger(context.Context, adminapi.DisableJudgerRequestObject) (adminapi.DisableJudgerResponseObject, error) {
	return nil, errNotImplementedadminAPI
}

// DrainJudger is not implemented yet.
func (adminAPI) DrainJudger(context.Context, adminapi.DrainJudgerRequestObject) (adminapi.DrainJudgerResponseObject, error) {
	return nil, errNotImplementedadminAPI
}

// EnableJudger is not implemented yet.
func (adminAPI) EnableJudger(context.Context, adminapi.EnableJudgerRequestObject) (adminapi.EnableJudgerResponseObject, error) {
	return nil, errNotImplementedadminAPI
}

// ResetJoinCode is not implemented yet.
func (adminAPI) ResetJoinCode(context.Context, adminapi.ResetJoinCodeRequestObject) (adminapi.ResetJoinCodeResponseObject, error) {
	return nil, errNotImplementedadminAPI
}

// ProbeJudger is not implemented yet.
func (adminAPI) ProbeJudger(context.Context, adminapi.ProbeJudgerRequestObject) (adminapi.ProbeJudgerResponseObject, error) {
	return nil, errNotImplementedadminAPI
}

// RevokeJudger is not implemented yet.
func (adminAPI) RevokeJudger(context.Context, adminapi.RevokeJudgerRequestObject) (adminapi.RevokeJudgerResponseObject, error) {
	return nil, errNotImplementedadminAPI
}

// RotateJudgerCredential is not implemented yet.
func (adminAPI) RotateJudgerCredential(context.Context, adminapi.RotateJudgerCredentialRequestObject) (adminapi.RotateJudgerCredentialResponseObject, error) {
	return nil, errNotImplementedadminAPI
}

// VerifyJudger is not implemented yet.
func (adminAPI) VerifyJudger(context.Context, adminapi.VerifyJudgerRequestObject) (adminapi.VerifyJudgerResponseObject, error) {
	return nil, errNotImplementedadminAPI
}

// Reconcile is not implemented yet.
func (adminAPI) Reconcile(context.Context, adminapi.ReconcileRequestObject) (adminapi.ReconcileResponseObject, error) {
	return nil, errNotImplementedadminAPI
}

// ListSettlementEvents is not implemented yet.
func (adminAPI) ListSettlementEvents(context.Context, adminapi.ListSettlementEventsRequestObject) (adminapi.ListSettlementEventsResponseObject, error) {
	return nil, errNotImplementedadminAPI
}

// RedeliverSettlementEvent is not implemented yet.
func (adminAPI) RedeliverSettlementEvent(context.Context, adminapi.RedeliverSettlementEventRequestObject) (adminapi.RedeliverSettlementEventResponseObject, error) {
	return nil, errNotImplementedadminAPI
}
