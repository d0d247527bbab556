package httpapi

import (
	"net/http"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/kece-oj/kece/contracts/adminapi"
	"github.com/kece-oj/kece/contracts/businessapi"
	"github.com/kece-oj/kece/contracts/machineapi"
	"github.com/kece-oj/kece/control/store"
)

// adminAPI implements adminapi.StrictServerInterface: one embedded type
// per aggregate, so no type carries the whole admin surface.
type adminAPI struct {
	fleetAdmin   // host groups, judgers, languages: admin.go, languages.go
	jobsAdmin    // jobs, settlement events, reconcile, verdicts, audit: admin_jobs.go, admin_audit.go
	tenantsAdmin // business tokens, webhook groups: admin_tokens.go, admin_webhooks.go
}

type (
	fleetAdmin   struct{ s *Server }
	jobsAdmin    struct{ s *Server }
	tenantsAdmin struct{ s *Server }
)

func newAdminAPI(s *Server) adminAPI {
	return adminAPI{fleetAdmin{s}, jobsAdmin{s}, tenantsAdmin{s}}
}

// businessAPI implements businessapi.StrictServerInterface.
type businessAPI struct{ s *Server }

// machineAPI implements machineapi.StrictServerInterface.
type machineAPI struct{ s *Server }

var (
	_ adminapi.StrictServerInterface    = adminAPI{}
	_ businessapi.StrictServerInterface = businessAPI{}
	_ machineapi.StrictServerInterface  = machineAPI{}
)

func (s *Server) errorHandlers(sf surface) (func(http.ResponseWriter, *http.Request, error), func(http.ResponseWriter, *http.Request, error)) {
	req := func(w http.ResponseWriter, r *http.Request, err error) {
		writeError(w, r, s.log, &Error{Status: http.StatusBadRequest, Code: codeRequestInvalid, Message: err.Error(), cause: err}, sf)
	}
	resp := func(w http.ResponseWriter, r *http.Request, err error) { writeError(w, r, s.log, err, sf) }
	return req, resp
}

func (s *Server) mountMachine() error {
	s.internal = http.NewServeMux()
	reqErr, respErr := s.errorHandlers(surfaceMachine)
	machineapi.HandlerFromMux(machineapi.NewStrictHandlerWithOptions(machineAPI{s}, nil,
		machineapi.StrictHTTPServerOptions{RequestErrorHandlerFunc: reqErr, ResponseErrorHandlerFunc: respErr}), s.internal)
	return nil
}

func (s *Server) mountAdmin() error {
	mux := http.NewServeMux()
	reqErr, respErr := s.errorHandlers(surfaceAdmin)
	adminapi.HandlerFromMux(adminapi.NewStrictHandlerWithOptions(newAdminAPI(s), nil,
		adminapi.StrictHTTPServerOptions{RequestErrorHandlerFunc: reqErr, ResponseErrorHandlerFunc: respErr}), mux)
	s.adminMux = mux
	s.admin = s.withCaller(s.tokenAuth(store.TokenAdmin, surfaceAdmin, nil,
		s.validated(mux, func() (*openapi3.T, error) { return adminapi.GetSpec() }, surfaceAdmin)))
	return nil
}

func (s *Server) mountBusiness() error {
	mux := http.NewServeMux()
	reqErr, respErr := s.errorHandlers(surfaceBusiness)
	businessapi.HandlerFromMux(businessapi.NewStrictHandlerWithOptions(businessAPI{s}, []businessapi.StrictMiddlewareFunc{declaredSize},
		businessapi.StrictHTTPServerOptions{RequestErrorHandlerFunc: reqErr, ResponseErrorHandlerFunc: respErr}), mux)
	s.businessMux = mux
	s.business = s.tokenAuth(store.TokenBusiness, surfaceBusiness, map[string]bool{"/api/v1/system/judgers/summary": true},
		s.rateLimited(s.validated(mux, func() (*openapi3.T, error) { return businessapi.GetSpec() }, surfaceBusiness)))
	return nil
}
