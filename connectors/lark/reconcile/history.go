package reconcile

import (
	"context"

	"github.com/larkline/larkline/connectors/lark/larkapi"
)

// History reads Lark's message history, one request per call and without
// retrying (the Reconciler retries, rate-limits and counts): *larkapi.Client in
// production. A failed call returns a *larkapi.APIError (or wraps one), so that
// IsRetryable and the rate-limit backoff can read its HTTP status, code and
// x-ogw-ratelimit-reset.
type History interface {
	ListMessages(ctx context.Context, q larkapi.ListQuery) (larkapi.ListPage, error)
}
