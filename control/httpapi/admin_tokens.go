package httpapi

// Admin API: business tokens, scoped to submission types and placed in a
// settlement-event consumer group (docs/business.md, "Tenancy").

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/kece-oj/kece/contracts/adminapi"
	"github.com/kece-oj/kece/control/ratelimit"
	"github.com/kece-oj/kece/control/store"
)

// ListBusinessTokens lists business tokens, never a secret.
func (a tenantsAdmin) ListBusinessTokens(ctx context.Context, _ adminapi.ListBusinessTokensRequestObject) (adminapi.ListBusinessTokensResponseObject, error) {
	toks, err := a.s.store.Tokens().ListTokens(ctx, store.TokenBusiness)
	if err != nil {
		return nil, err
	}
	out := adminapi.BusinessTokenList{Tokens: make([]adminapi.BusinessToken, 0, len(toks))}
	for _, t := range toks {
		out.Tokens = append(out.Tokens, businessTokenOut(t))
	}
	return adminapi.ListBusinessTokens200JSONResponse(out), nil
}

// CreateBusinessToken issues a business token; the secret is answered once.
func (a tenantsAdmin) CreateBusinessToken(ctx context.Context, req adminapi.CreateBusinessTokenRequestObject) (adminapi.CreateBusinessTokenResponseObject, error) {
	body := req.Body
	spec := store.TokenSpec{Kind: store.TokenBusiness, Name: body.Name, Actor: actor(ctx)}
	if body.SubmissionTypes != nil {
		spec.SubmissionTypes = *body.SubmissionTypes
	}
	if body.ConsumerGroup != nil {
		spec.ConsumerGroup = *body.ConsumerGroup
	}
	if body.ExpiresInMs != nil {
		spec.ExpiresIn = time.Duration(*body.ExpiresInMs) * time.Millisecond
	}
	lim, err := rateLimitIn(body.RateLimit)
	if err != nil {
		return nil, err
	}
	spec.RateLimit = lim
	tok, err := a.s.store.Tokens().IssueToken(ctx, spec)
	if errors.Is(err, store.ErrConflict) {
		return nil, apiErr(http.StatusConflict, codeNameTaken, err)
	}
	if err != nil {
		return nil, err
	}
	info, err := a.businessToken(ctx, body.Name)
	if err != nil {
		return nil, err
	}
	a.s.log.InfoContext(ctx, "business token created", "token_name", body.Name, "submission_types", info.SubmissionTypes,
		"consumer_group", info.ConsumerGroup, "actor", actor(ctx))
	return adminapi.CreateBusinessToken201JSONResponse{Token: tok, BusinessToken: info}, nil
}

// SetBusinessTokenRateLimit sets a business token's own request budget,
// or (no rateLimit) returns it to the server's default.
func (a tenantsAdmin) SetBusinessTokenRateLimit(ctx context.Context, req adminapi.SetBusinessTokenRateLimitRequestObject) (adminapi.SetBusinessTokenRateLimitResponseObject, error) {
	lim, err := rateLimitIn(req.Body.RateLimit)
	if err != nil {
		return nil, err
	}
	err = a.s.store.Tokens().SetTokenRateLimit(ctx, req.Name, lim, actor(ctx))
	if errors.Is(err, store.ErrNotFound) {
		return nil, apiErr(http.StatusNotFound, codeTokenNotFound, err)
	}
	if err != nil {
		return nil, err
	}
	info, err := a.businessToken(ctx, req.Name)
	if err != nil {
		return nil, err
	}
	a.s.log.InfoContext(ctx, "business token rate limit set", "token_name", req.Name, "rate_limit", rateLimitText(lim), "actor", actor(ctx))
	return adminapi.SetBusinessTokenRateLimit200JSONResponse(info), nil
}

// rateLimitIn checks a requested budget: a nonsensical one (which the
// schema's bounds let through) is 400 REQUEST_INVALID naming the field.
func rateLimitIn(in *adminapi.RateLimit) (*ratelimit.Limit, error) {
	if in == nil {
		return nil, nil
	}
	lim := &ratelimit.Limit{Rate: in.Rate, Burst: in.Burst}
	err := lim.Validate()
	var fe *ratelimit.FieldError
	if !errors.As(err, &fe) {
		return lim, nil
	}
	// Every problem, each under the field's name in the request.
	var msgs []string
	for _, p := range err.(interface{ Unwrap() []error }).Unwrap() {
		if errors.As(p, &fe) {
			msgs = append(msgs, "rateLimit."+fe.Field+": "+fe.Msg)
		}
	}
	e := apiErr(http.StatusBadRequest, codeRequestInvalid, errors.New(strings.Join(msgs, "; ")))
	errors.As(err, &fe)
	e.Details = map[string]any{"field": "rateLimit." + fe.Field}
	return nil, e
}

func rateLimitText(lim *ratelimit.Limit) string {
	if lim == nil {
		return "default"
	}
	return lim.String()
}

// RevokeBusinessToken refuses a business token from now on.
func (a tenantsAdmin) RevokeBusinessToken(ctx context.Context, req adminapi.RevokeBusinessTokenRequestObject) (adminapi.RevokeBusinessTokenResponseObject, error) {
	live, err := a.s.store.Tokens().RevokeTokenAs(ctx, store.TokenBusiness, req.Name, actor(ctx), req.Body.Reason)
	if err != nil {
		return nil, err
	}
	if !live {
		return nil, apiErr(http.StatusNotFound, codeTokenNotFound, fmt.Errorf("no live business token named %q", req.Name))
	}
	info, err := a.businessToken(ctx, req.Name)
	if err != nil {
		return nil, err
	}
	a.s.log.InfoContext(ctx, "business token revoked", "token_name", req.Name, "actor", actor(ctx))
	return adminapi.RevokeBusinessToken200JSONResponse(info), nil
}

// businessToken reads one business token by name (the token table holds
// one row per client, so a list read is cheap and keeps one query).
func (a tenantsAdmin) businessToken(ctx context.Context, name string) (adminapi.BusinessToken, error) {
	toks, err := a.s.store.Tokens().ListTokens(ctx, store.TokenBusiness)
	if err != nil {
		return adminapi.BusinessToken{}, err
	}
	for _, t := range toks {
		if t.Name == name {
			return businessTokenOut(t), nil
		}
	}
	return adminapi.BusinessToken{}, apiErr(http.StatusNotFound, codeTokenNotFound, fmt.Errorf("no business token named %q", name))
}

func businessTokenOut(t store.TokenInfo) adminapi.BusinessToken {
	state := adminapi.BusinessTokenState(t.State)
	out := adminapi.BusinessToken{Name: t.Name, State: state, ConsumerGroup: t.ConsumerGroup, CreatedAt: t.CreatedAt,
		LastUsedAt: t.LastUsedAt, ExpiresAt: t.ExpiresAt, RevokedAt: t.RevokedAt}
	if t.SubmissionTypes != nil {
		types := append([]string(nil), t.SubmissionTypes...)
		out.SubmissionTypes = &types
	}
	if t.RateLimit != nil {
		out.RateLimit = &adminapi.RateLimit{Rate: t.RateLimit.Rate, Burst: t.RateLimit.Burst}
	}
	return out
}
