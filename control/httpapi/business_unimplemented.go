package httpapi

// Temporary: operations of businessapi not built yet answer 501. Each is moved to
// its real file when implemented; this file is deleted when empty.

import (
	"context"
	"errors"
	"net/http"

	"github.com/kece-oj/kece/contracts/businessapi"
)

var errNotImplementedbusinessAPI = apiErr(http.StatusNotImplemented, "NOT_IMPLEMENTED", errors.New("not implemented yet"))

// UploadArtifact is not implemented yet.
func (businessAPI) UploadArtifact(context.Context, businessapi.UploadArtifactRequestObject) (businessapi.UploadArtifactResponseObject, error) {
	return nil, errNotImplementedbusinessAPI
}

// PublishManifest is not implemented yet.
func (businessAPI) PublishManifest(context.Context, businessapi.PublishManifestRequestObject) (businessapi.PublishManifestResponseObject, error) {
	return nil, errNotImplementedbusinessAPI
}

// GetManifest is not implemented yet.
func (businessAPI) GetManifest(context.Context, businessapi.GetManifestRequestObject) (businessapi.GetManifestResponseObject, error) {
	return nil, errNotImplementedbusinessAPI
}

// AckSettlementEvents is not implemented yet.
func (businessAPI) AckSettlementEvents(context.Context, businessapi.AckSettlementEventsRequestObject) (businessapi.AckSettlementEventsResponseObject, error) {
	return nil, errNotImplementedbusinessAPI
}

// ClaimSettlementEvents is not implemented yet.
func (businessAPI) ClaimSettlementEvents(context.Context, businessapi.ClaimSettlementEventsRequestObject) (businessapi.ClaimSettlementEventsResponseObject, error) {
	return nil, errNotImplementedbusinessAPI
}

// EnqueueSubmission is not implemented yet.
func (businessAPI) EnqueueSubmission(context.Context, businessapi.EnqueueSubmissionRequestObject) (businessapi.EnqueueSubmissionResponseObject, error) {
	return nil, errNotImplementedbusinessAPI
}

// GetSubmission is not implemented yet.
func (businessAPI) GetSubmission(context.Context, businessapi.GetSubmissionRequestObject) (businessapi.GetSubmissionResponseObject, error) {
	return nil, errNotImplementedbusinessAPI
}

// CancelSubmission is not implemented yet.
func (businessAPI) CancelSubmission(context.Context, businessapi.CancelSubmissionRequestObject) (businessapi.CancelSubmissionResponseObject, error) {
	return nil, errNotImplementedbusinessAPI
}

// RejudgeSubmission is not implemented yet.
func (businessAPI) RejudgeSubmission(context.Context, businessapi.RejudgeSubmissionRequestObject) (businessapi.RejudgeSubmissionResponseObject, error) {
	return nil, errNotImplementedbusinessAPI
}

// GetJudgersSummary is not implemented yet.
func (businessAPI) GetJudgersSummary(context.Context, businessapi.GetJudgersSummaryRequestObject) (businessapi.GetJudgersSummaryResponseObject, error) {
	return nil, errNotImplementedbusinessAPI
}
