// Package console is the admin console served by kece-control under
// /console/, and the public status page at /status.
//
// It owns browser sessions (opened with an admin token, stored in MySQL
// through control/store so any replica serves them), CSRF tokens, the
// security headers and the server-rendered pages. It owns no rule of the
// scheduler: every read and every action goes through the admin API's
// generated client (contracts/adminapi), served in process by this
// replica's own API handler (httpapi.InProcessTransport) as the session's
// admin token, so validation, error codes and audit records are the API's.
// The status page renders the public summary of the business API the same
// way. It must not touch SQL or the store beyond the session calls.
package console
