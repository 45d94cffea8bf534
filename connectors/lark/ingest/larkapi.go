package ingest

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	lark "github.com/larksuite/oapi-sdk-go/v3"
	larkcore "github.com/larksuite/oapi-sdk-go/v3/core"
	larkcontact "github.com/larksuite/oapi-sdk-go/v3/service/contact/v3"
	larkim "github.com/larksuite/oapi-sdk-go/v3/service/im/v1"

	"github.com/larkline/larkline/schemas/ids"
)

// MaxDirectoryBatch is Lark's limit of user ids per contact batch request.
const MaxDirectoryBatch = 50

// LarkDirectory looks display names up through the SDK's contact batch API
// (GET /open-apis/contact/v3/users/batch, at most 50 open_ids per call). Users
// outside the app's contact range are silently absent from the answer, as Lark does.
type LarkDirectory struct{ client *lark.Client }

// NewLarkDirectory wraps an SDK client (lark.NewClient with the app's credentials).
func NewLarkDirectory(client *lark.Client) (*LarkDirectory, error) {
	if client == nil {
		return nil, fmt.Errorf("%w: nil lark client", ErrInvalidOptions)
	}
	return &LarkDirectory{client: client}, nil
}

// Names returns the display names Lark knows among openIDs (at most 50). An error is
// an *APIError; IsRetryable classifies it.
func (d *LarkDirectory) Names(ctx context.Context, openIDs []string) (map[string]string, error) {
	const op = "contact users batch"
	if len(openIDs) == 0 || len(openIDs) > MaxDirectoryBatch {
		return nil, fmt.Errorf("lark %s: %d ids, want 1..%d", op, len(openIDs), MaxDirectoryBatch)
	}
	req := larkcontact.NewBatchUserReqBuilder().UserIds(openIDs).UserIdType("open_id").Build()
	resp, err := d.client.Contact.User.Batch(ctx, req)
	if err != nil {
		return nil, &APIError{Op: op, Err: err}
	}
	if !resp.Success() {
		return nil, apiError(op, resp.ApiResp, resp.Code, resp.Msg)
	}
	out := make(map[string]string, len(openIDs))
	if resp.Data != nil {
		for _, u := range resp.Data.Items {
			if u == nil || u.OpenId == nil || u.Name == nil {
				continue
			}
			out[*u.OpenId] = *u.Name
		}
	}
	return out, nil
}

// LarkMessages fetches single messages through the SDK's get-message API
// (GET /open-apis/im/v1/messages/:message_id). The event path uses it only for a
// recall of a message it has not seen.
type LarkMessages struct{ client *lark.Client }

// NewLarkMessages wraps an SDK client.
func NewLarkMessages(client *lark.Client) (*LarkMessages, error) {
	if client == nil {
		return nil, fmt.Errorf("%w: nil lark client", ErrInvalidOptions)
	}
	return &LarkMessages{client: client}, nil
}

// GetMessage returns the message, recalled ones included (deleted: true). A message
// Lark does not serve gives ErrMessageNotFound; other failures are *APIError.
func (m *LarkMessages) GetMessage(ctx context.Context, id ids.MessageID) (*larkim.Message, error) {
	const op = "get message"
	resp, err := m.client.Im.Message.Get(ctx, larkim.NewGetMessageReqBuilder().MessageId(string(id)).Build())
	if err != nil {
		return nil, &APIError{Op: op, Err: err}
	}
	if !resp.Success() {
		switch resp.Code {
		case codeInvalidParam, codeMessageDeleted:
			return nil, fmt.Errorf("%w: %s (code %d)", ErrMessageNotFound, id, resp.Code)
		}
		return nil, apiError(op, resp.ApiResp, resp.Code, resp.Msg)
	}
	if resp.Data == nil {
		return nil, fmt.Errorf("%w: %s (empty answer)", ErrMessageNotFound, id)
	}
	for _, item := range resp.Data.Items {
		// A merge_forward answer lists its children too; pick the message asked for.
		if item != nil && item.MessageId != nil && *item.MessageId == string(id) {
			return item, nil
		}
	}
	return nil, fmt.Errorf("%w: %s (not in the answer)", ErrMessageNotFound, id)
}

// apiError builds an *APIError from an answer with a non-zero code, reading Lark's
// rate-limit reset header.
func apiError(op string, raw *larkcore.ApiResp, code int, msg string) *APIError {
	e := &APIError{Op: op, Code: code, Msg: msg}
	if raw != nil {
		e.Status = raw.StatusCode
		if s := raw.Header.Get("X-Ogw-Ratelimit-Reset"); s != "" {
			if sec, err := strconv.Atoi(s); err == nil && sec > 0 {
				e.RetryAfter = time.Duration(sec) * time.Second
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
