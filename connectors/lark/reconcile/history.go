package reconcile

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	lark "github.com/larksuite/oapi-sdk-go/v3"
	larkcore "github.com/larksuite/oapi-sdk-go/v3/core"
	larkim "github.com/larksuite/oapi-sdk-go/v3/service/im/v1"

	"github.com/larkline/larkline/connectors/lark/ingest"
)

// Container types of the message history API.
const (
	// ContainerChat pages a chat: every message except the replies inside threads.
	ContainerChat = "chat"
	// ContainerThread pages one thread (its root and replies). It takes no time
	// range.
	ContainerThread = "thread"
)

// Sort orders of the message history API.
const (
	sortAsc  = "ByCreateTimeAsc"
	sortDesc = "ByCreateTimeDesc"
)

// EndpointListMessages is the endpoint label of larkline_lark_api_calls_total for
// GET /open-apis/im/v1/messages.
const EndpointListMessages = "im.message.list"

// ListQuery is one request of GET /open-apis/im/v1/messages.
type ListQuery struct {
	// ContainerType is ContainerChat or ContainerThread; ContainerID the chat id
	// (oc_…) or thread id (omt_…).
	ContainerType string
	ContainerID   string
	// Start and End bound a chat container by creation time. Lark takes whole
	// seconds: Start is sent rounded down, End rounded down. Zero: unbounded.
	// Thread containers take neither.
	Start, End time.Time
	// Descending asks for ByCreateTimeDesc; the default is ByCreateTimeAsc. The
	// order must not change while following one pagination.
	Descending bool
	// PageSize is 1..MaxPageSize.
	PageSize int
	// PageToken continues a pagination ("" for the first page).
	PageToken string
}

// ListPage is one answered page.
type ListPage struct {
	Items []*larkim.Message
	// HasMore and PageToken say whether and how to continue; Lark omits the token
	// on the last page.
	HasMore   bool
	PageToken string
	// RequestID is Lark's log id of the answer (X-Tt-Logid), for logs.
	RequestID string
}

// History reads Lark's message history, one request per call and without
// retrying (the Reconciler retries, rate-limits and counts). A failed call returns
// an *ingest.APIError (or wraps one), so that IsRetryable and the rate-limit
// backoff can read its HTTP status, code and x-ogw-ratelimit-reset.
type History interface {
	ListMessages(ctx context.Context, q ListQuery) (ListPage, error)
}

// LarkHistory is the History of the official SDK (client.Im.Message.List). Point
// the client at another base URL with lark.WithOpenBaseUrl, as tests do with
// larktest.
type LarkHistory struct{ client *lark.Client }

// NewLarkHistory wraps an SDK client made with the app's credentials.
func NewLarkHistory(client *lark.Client) (*LarkHistory, error) {
	if client == nil {
		return nil, fmt.Errorf("%w: nil lark client", ErrInvalidOptions)
	}
	return &LarkHistory{client: client}, nil
}

const opListMessages = "im message list"

// ListMessages sends one history request.
func (h *LarkHistory) ListMessages(ctx context.Context, q ListQuery) (ListPage, error) {
	if err := q.validate(); err != nil {
		return ListPage{}, err
	}
	b := larkim.NewListMessageReqBuilder().
		ContainerIdType(q.ContainerType).
		ContainerId(q.ContainerID).
		PageSize(q.PageSize)
	if q.Descending {
		b.SortType(sortDesc)
	} else {
		b.SortType(sortAsc)
	}
	if !q.Start.IsZero() {
		b.StartTime(strconv.FormatInt(q.Start.Unix(), 10))
	}
	if !q.End.IsZero() {
		b.EndTime(strconv.FormatInt(q.End.Unix(), 10))
	}
	if q.PageToken != "" {
		b.PageToken(q.PageToken)
	}
	resp, err := h.client.Im.Message.List(ctx, b.Build())
	if err != nil {
		return ListPage{}, &ingest.APIError{Op: opListMessages, Err: err}
	}
	if !resp.Success() {
		return ListPage{}, apiError(opListMessages, resp.ApiResp, resp.Code, resp.Msg)
	}
	page := ListPage{RequestID: resp.RequestId()}
	if d := resp.Data; d != nil {
		page.Items = d.Items
		page.HasMore = d.HasMore != nil && *d.HasMore
		if d.PageToken != nil {
			page.PageToken = *d.PageToken
		}
	}
	if page.HasMore && page.PageToken == "" {
		return ListPage{}, fmt.Errorf("%w: has_more without page_token (%s %s, request %s)", ErrMalformedPage, q.ContainerType, q.ContainerID, page.RequestID)
	}
	return page, nil
}

func (q ListQuery) validate() error {
	switch {
	case q.ContainerType != ContainerChat && q.ContainerType != ContainerThread:
		return fmt.Errorf("%w: container type %q", ErrInvalidQuery, q.ContainerType)
	case q.ContainerID == "":
		return fmt.Errorf("%w: empty container id", ErrInvalidQuery)
	case q.ContainerType == ContainerThread && (!q.Start.IsZero() || !q.End.IsZero()):
		return fmt.Errorf("%w: thread containers take no time range", ErrInvalidQuery)
	case q.PageSize < 1 || q.PageSize > MaxPageSize:
		return fmt.Errorf("%w: page size %d outside [1, %d]", ErrInvalidQuery, q.PageSize, MaxPageSize)
	case !q.Start.IsZero() && !q.End.IsZero() && q.End.Unix() < q.Start.Unix():
		return fmt.Errorf("%w: end %d before start %d", ErrInvalidQuery, q.End.Unix(), q.Start.Unix())
	}
	return nil
}

// apiError builds an *ingest.APIError from an answer with a non-zero code,
// reading Lark's rate-limit reset header (seconds).
func apiError(op string, raw *larkcore.ApiResp, code int, msg string) *ingest.APIError {
	e := &ingest.APIError{Op: op, Code: code, Msg: msg}
	if raw != nil {
		e.Status = raw.StatusCode
		if s := raw.Header.Get("X-Ogw-Ratelimit-Reset"); s != "" {
			if sec, err := strconv.Atoi(s); err == nil && sec > 0 {
				e.RetryAfter = min(time.Duration(sec)*time.Second, maxRetryAfter)
			}
		}
		if e.RetryAfter == 0 && (raw.StatusCode == http.StatusTooManyRequests || code == codeRateLimited) {
			e.RetryAfter = time.Second
		}
	}
	if len(e.Msg) > 200 {
		e.Msg = e.Msg[:200]
	}
	return e
}
