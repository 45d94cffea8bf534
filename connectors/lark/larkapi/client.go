package larkapi

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	lark "github.com/larksuite/oapi-sdk-go/v3"
	larkcore "github.com/larksuite/oapi-sdk-go/v3/core"
	larkcontact "github.com/larksuite/oapi-sdk-go/v3/service/contact/v3"
	larkim "github.com/larksuite/oapi-sdk-go/v3/service/im/v1"

	"github.com/larkline/larkline/schemas/ids"
)

// SDKOptions configure the SDK client NewSDK builds.
type SDKOptions struct {
	// AppID and AppSecret are the app's credentials; the SDK exchanges them for the
	// tenant access token and renews it.
	AppID, AppSecret string
	// OpenBaseURL is the Open API's base URL ("" for Lark's own, lark.LarkBaseUrl;
	// larktest's URL in tests).
	OpenBaseURL string
	// Logger receives the SDK's own log lines, through SDKLogger (nil: discarded).
	Logger *slog.Logger
	// HTTPClient, when set, sends the requests (timeouts, proxies).
	HTTPClient *http.Client
}

// NewSDK builds the official SDK client with larkline's settings: the sanitizing
// logger at warn level, the given base URL and HTTP client. Its tokens live in the
// cache that forgets a refused token (tokens.go), installed once per process.
func NewSDK(o SDKOptions) *lark.Client {
	opts := []lark.ClientOptionFunc{
		lark.WithLogger(SDKLogger(o.Logger)),
		lark.WithLogLevel(larkcore.LogLevelWarn),
	}
	if o.OpenBaseURL != "" {
		opts = append(opts, lark.WithOpenBaseUrl(o.OpenBaseURL))
	}
	if o.HTTPClient != nil {
		opts = append(opts, lark.WithHttpClient(o.HTTPClient))
	}
	return lark.NewClient(o.AppID, o.AppSecret, opts...)
}

// Client is larkline's Lark Open API client. It is safe for concurrent use.
type Client struct{ sdk *lark.Client }

// New wraps an SDK client (NewSDK, or lark.NewClient pointed at larktest in tests).
func New(sdk *lark.Client) (*Client, error) {
	if sdk == nil {
		return nil, fmt.Errorf("%w: nil lark client", ErrInvalidOptions)
	}
	return &Client{sdk: sdk}, nil
}

// MaxDirectoryBatch is Lark's limit of user ids per contact batch request.
const MaxDirectoryBatch = 50

// Names looks display names up through the contact batch API
// (GET /open-apis/contact/v3/users/batch) for at most MaxDirectoryBatch open_ids.
// Users outside the app's contact range are silently absent from the answer, as
// Lark does. An error is an *APIError; IsRetryable classifies it.
func (c *Client) Names(ctx context.Context, openIDs []string) (map[string]string, error) {
	const op = "contact users batch"
	if len(openIDs) == 0 || len(openIDs) > MaxDirectoryBatch {
		return nil, fmt.Errorf("lark %s: %d ids, want 1..%d", op, len(openIDs), MaxDirectoryBatch)
	}
	req := larkcontact.NewBatchUserReqBuilder().UserIds(openIDs).UserIdType("open_id").Build()
	resp, err := c.sdk.Contact.User.Batch(ctx, req)
	if err != nil {
		return nil, &APIError{Op: op, Err: err}
	}
	if !resp.Success() {
		return nil, answerError(op, resp.ApiResp, resp.Code, resp.Msg)
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

// GetMessage returns one message through GET /open-apis/im/v1/messages/:message_id,
// recalled ones included (deleted: true). A message Lark does not serve gives
// ErrMessageNotFound; other failures are *APIError. The event path uses it only
// for a recall of a message it has not seen.
func (c *Client) GetMessage(ctx context.Context, id ids.MessageID) (*larkim.Message, error) {
	const op = "get message"
	resp, err := c.sdk.Im.Message.Get(ctx, larkim.NewGetMessageReqBuilder().MessageId(string(id)).Build())
	if err != nil {
		return nil, &APIError{Op: op, Err: err}
	}
	if !resp.Success() {
		switch resp.Code {
		case CodeInvalidParam, CodeMessageDeleted:
			return nil, fmt.Errorf("%w: %s (code %d)", ErrMessageNotFound, id, resp.Code)
		}
		return nil, answerError(op, resp.ApiResp, resp.Code, resp.Msg)
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

// Chat modes of the chat info API's chat_mode.
const (
	ModeGroup = "group"
	ModeTopic = "topic"
	ModeP2P   = "p2p"
)

// ChatInfo is what the chat info API says about a chat.
type ChatInfo struct {
	// Mode is chat_mode: ModeGroup, ModeTopic, ModeP2P, or what else Lark sent
	// (empty when it sent none).
	Mode string
}

// GetChat sends one chat info request (GET /open-apis/im/v1/chats/:chat_id). A
// failure is an *APIError (or wraps one), so IsRetryable applies.
func (c *Client) GetChat(ctx context.Context, chat ids.ChatID) (ChatInfo, error) {
	const op = "im chat get"
	resp, err := c.sdk.Im.Chat.Get(ctx, larkim.NewGetChatReqBuilder().ChatId(string(chat)).Build())
	if err != nil {
		return ChatInfo{}, &APIError{Op: op, Err: err}
	}
	if !resp.Success() {
		return ChatInfo{}, answerError(op, resp.ApiResp, resp.Code, resp.Msg)
	}
	var info ChatInfo
	if d := resp.Data; d != nil {
		switch {
		case d.ChatMode != nil:
			info.Mode = *d.ChatMode
		case d.ChatType != nil && *d.ChatType == ModeP2P:
			// chat_type is private|public for groups; an older answer may say p2p there
			info.Mode = ModeP2P
		}
	}
	return info, nil
}

// Container types of the message history API.
const (
	// ContainerChat pages a chat: every message except the replies inside threads.
	ContainerChat = "chat"
	// ContainerThread pages one thread (its root and replies). It takes no time
	// range.
	ContainerThread = "thread"
)

// MaxPageSize is Lark's largest page_size of the message history API
// (lark-api-notes.md §4.1).
const MaxPageSize = 50

// MaxRequestsPerSecond is Lark's documented per-app limit of the message history
// API (lark-api-notes.md §4.1); callers' rate limiters stay at or below it.
const MaxRequestsPerSecond = 50

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

const opListMessages = "im message list"

// ListMessages sends one history request. An invalid query is refused before
// sending (ErrInvalidQuery); a page that cannot be followed is ErrMalformedPage;
// other failures are *APIError.
func (c *Client) ListMessages(ctx context.Context, q ListQuery) (ListPage, error) {
	if err := q.Validate(); err != nil {
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
	resp, err := c.sdk.Im.Message.List(ctx, b.Build())
	if err != nil {
		return ListPage{}, &APIError{Op: opListMessages, Err: err}
	}
	if !resp.Success() {
		return ListPage{}, answerError(opListMessages, resp.ApiResp, resp.Code, resp.Msg)
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

// Validate reports whether q may be sent (ErrInvalidQuery when not).
func (q ListQuery) Validate() error {
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
