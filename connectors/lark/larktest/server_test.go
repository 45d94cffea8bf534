package larktest_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	lark "github.com/larksuite/oapi-sdk-go/v3"
	larkcore "github.com/larksuite/oapi-sdk-go/v3/core"
	larkcontact "github.com/larksuite/oapi-sdk-go/v3/service/contact/v3"
	larkim "github.com/larksuite/oapi-sdk-go/v3/service/im/v1"

	"github.com/larkline/larkline/connectors/lark/larktest"
	"github.com/larkline/larkline/internal/testenv"
)

// listAll pages a container with the real SDK until has_more is false.
func listAll(t *testing.T, cli *lark.Client, containerType, id string, pageSize int, mod func(*larkim.ListMessageReqBuilder)) ([]*larkim.Message, int) {
	t.Helper()
	var out []*larkim.Message
	token := ""
	for pages := 1; pages <= 1000; pages++ {
		b := larkim.NewListMessageReqBuilder().ContainerIdType(containerType).ContainerId(id).PageSize(pageSize)
		if mod != nil {
			mod(b)
		}
		if token != "" {
			b.PageToken(token)
		}
		resp, err := cli.Im.Message.List(context.Background(), b.Build())
		if err != nil {
			t.Fatalf("list page %d: %v", pages, err)
		}
		if !resp.Success() {
			t.Fatalf("list page %d: code %d %s", pages, resp.Code, resp.Msg)
		}
		out = append(out, resp.Data.Items...)
		if !deref(resp.Data.HasMore) {
			if resp.Data.PageToken != nil {
				t.Fatalf("last page carries page_token %q; Lark omits it", *resp.Data.PageToken)
			}
			return out, pages
		}
		if deref(resp.Data.PageToken) == "" {
			t.Fatalf("page %d has_more without page_token", pages)
		}
		token = *resp.Data.PageToken
	}
	t.Fatal("more than 1000 pages")
	return nil, 0
}

func messageIDs(ms []*larkim.Message) []string {
	var out []string
	for _, m := range ms {
		out = append(out, deref(m.MessageId))
	}
	return out
}

func TestSDKListsChatAndThreadAcrossPages(t *testing.T) {
	srv := newServer(t, fixture(t), nil)
	cli := sdkClient(srv, fxSecret)
	var wantChat []string
	for i := 1; i <= fxRootCnt; i++ {
		wantChat = append(wantChat, string(fxID(i)))
	}
	wantThread := []string{string(fxID(3)), string(fxReply(1)), string(fxReply(2)), string(fxReply(3)), string(fxReply(4))}
	desc := slices.Clone(wantChat)
	slices.Reverse(desc)

	tests := []struct {
		name          string
		containerType string
		id            string
		pageSize      int
		mod           func(*larkim.ListMessageReqBuilder)
		want          []string
		wantPages     int
	}{
		{"chat pages of 5 hold only thread roots", larktest.ContainerChat, string(fxChat), 5, nil, wantChat, 3},
		{"chat in one page of 50", larktest.ContainerChat, string(fxChat), 50, nil, wantChat, 1},
		{"chat page size equal to the count", larktest.ContainerChat, string(fxChat), 12, nil, wantChat, 1},
		{"chat descending", larktest.ContainerChat, string(fxChat), 5, func(b *larkim.ListMessageReqBuilder) { b.SortType(larktest.SortDesc) }, desc, 3},
		{"chat time range in seconds is inclusive", larktest.ContainerChat, string(fxChat), 2, func(b *larkim.ListMessageReqBuilder) {
			b.StartTime(ts(fxBase.Add(3 * time.Minute))).EndTime(ts(fxBase.Add(5 * time.Minute)))
		}, []string{"om_03", "om_04", "om_05"}, 2},
		{"thread holds root and replies", larktest.ContainerThread, fxThread, 2, nil, wantThread, 3},
		{"unbound chat the bot is in", larktest.ContainerChat, string(fxOther), 20, nil, []string{"om_elsewhere"}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, pages := listAll(t, cli, tt.containerType, tt.id, tt.pageSize, tt.mod)
			if ids := messageIDs(got); !slices.Equal(ids, tt.want) {
				t.Fatalf("ids = %v, want %v", ids, tt.want)
			}
			if pages != tt.wantPages {
				t.Fatalf("pages = %d, want %d", pages, tt.wantPages)
			}
		})
	}
	if n := srv.Calls(larktest.PathTenantToken); n != 1 {
		t.Fatalf("token endpoint called %d times; the SDK caches one token", n)
	}
}

func ts(t time.Time) string { return strconv.FormatInt(t.Unix(), 10) }

func TestSDKIteratorStopsOnLastPage(t *testing.T) {
	srv := newServer(t, fixture(t), nil)
	cli := sdkClient(srv, fxSecret)
	it, err := cli.Im.Message.ListByIterator(context.Background(), larkim.NewListMessageReqBuilder().
		ContainerIdType(larktest.ContainerChat).ContainerId(string(fxChat)).PageSize(5).Build())
	must(t, err)
	n := 0
	for {
		ok, _, err := it.Next()
		must(t, err)
		if !ok {
			break
		}
		n++
	}
	if n != fxRootCnt || srv.Calls(larktest.PathListMessages) != 3 {
		t.Fatalf("iterator saw %d messages in %d calls, want %d in 3", n, srv.Calls(larktest.PathListMessages), fxRootCnt)
	}
}

func TestHistoryItemShapes(t *testing.T) {
	srv := newServer(t, fixture(t), nil)
	cli := sdkClient(srv, fxSecret)
	got, _ := listAll(t, cli, larktest.ContainerChat, string(fxChat), 50, nil)
	byID := map[string]*larkim.Message{}
	for _, m := range got {
		byID[deref(m.MessageId)] = m
	}
	thread, _ := listAll(t, cli, larktest.ContainerThread, fxThread, 50, nil)
	for _, m := range thread {
		byID[deref(m.MessageId)] = m
	}
	tests := []struct {
		name  string
		id    string
		check func(m *larkim.Message) string
	}{
		{"user text", "om_01", func(m *larkim.Message) string {
			return expect(deref(m.MsgType) == "text" && deref(m.Body.Content) == `{"text":"message 1"}` &&
				deref(m.Sender.Id) == fxAlice && deref(m.Sender.IdType) == "open_id" && deref(m.Sender.SenderType) == "user" &&
				deref(m.Sender.TenantKey) == fxTenant && deref(m.ChatId) == string(fxChat) &&
				deref(m.CreateTime) == larktest.Ms(fxBase.Add(time.Minute)) && deref(m.UpdateTime) == deref(m.CreateTime) &&
				m.Deleted != nil && !*m.Deleted && m.Updated != nil && !*m.Updated && m.RootId == nil && m.ThreadId == nil)
		}},
		{"edited text shows the edit", "om_02", func(m *larkim.Message) string {
			return expect(deref(m.Body.Content) == `{"text":"message 2 (edited)"}` && deref(m.Updated) &&
				deref(m.UpdateTime) == larktest.Ms(fxBase.Add(30*time.Minute)))
		}},
		{"thread root carries the thread id", "om_03", func(m *larkim.Message) string {
			return expect(deref(m.ThreadId) == fxThread && m.RootId == nil)
		}},
		{"thread reply", "om_t2", func(m *larkim.Message) string {
			return expect(deref(m.ThreadId) == fxThread && deref(m.RootId) == "om_03" && deref(m.ParentId) == "om_03")
		}},
		{"own bot card is an app message", "om_04", func(m *larkim.Message) string {
			return expect(deref(m.MsgType) == "interactive" && deref(m.Sender.Id) == srv.AppID() &&
				deref(m.Sender.IdType) == "app_id" && deref(m.Sender.SenderType) == "app")
		}},
		{"quote reply stays in the chat container with a mention", "om_06", func(m *larkim.Message) string {
			return expect(deref(m.RootId) == "om_05" && m.ThreadId == nil && len(m.Mentions) == 1 &&
				deref(m.Mentions[0].Id) == fxAlice && deref(m.Mentions[0].IdType) == "open_id" &&
				deref(m.Mentions[0].Key) == "@_user_1" && deref(m.Mentions[0].Name) == "Alice")
		}},
		{"recalled message is deleted", "om_07", func(m *larkim.Message) string {
			return expect(deref(m.Deleted) && deref(m.Body.Content) == larktest.RecalledContent &&
				deref(m.UpdateTime) == larktest.Ms(fxBase.Add(31*time.Minute)))
		}},
		{"post keeps its code block", "om_08", func(m *larkim.Message) string {
			return expect(deref(m.MsgType) == "post" && strings.Contains(deref(m.Body.Content), `"tag":"code_block"`))
		}},
		{"dropped event is still in history", "om_11", func(m *larkim.Message) string {
			return expect(deref(m.Body.Content) == `{"text":"message 11"}`)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, ok := byID[tt.id]
			if !ok {
				t.Fatalf("%s not listed", tt.id)
			}
			if msg := tt.check(m); msg != "" {
				raw, _ := json.Marshal(m)
				t.Fatalf("%s: %s", msg, raw)
			}
		})
	}
}

func expect(ok bool) string {
	if ok {
		return ""
	}
	return "unexpected item"
}

func TestHistoryFollowsTheClock(t *testing.T) {
	clock := testenv.NewClock(fxBase.Add(5*time.Minute + 30*time.Second))
	srv := newServer(t, fixture(t), func(o *larktest.Options) { o.Now = clock.Now })
	cli := sdkClient(srv, fxSecret)
	set := clock.Set

	got, _ := listAll(t, cli, larktest.ContainerChat, string(fxChat), 50, nil)
	if ids := messageIDs(got); !slices.Equal(ids, []string{"om_01", "om_02", "om_03", "om_04", "om_05"}) {
		t.Fatalf("at 10:05:30 history = %v", ids)
	}
	if deref(got[1].Updated) {
		t.Fatal("edit at 10:30 already applied at 10:05:30")
	}
	set(fxBase.Add(3*time.Minute + 5*time.Second))
	got, _ = listAll(t, cli, larktest.ContainerChat, string(fxChat), 50, nil)
	if len(got) != 3 || deref(got[2].ThreadId) != "" {
		t.Fatal("at 10:03:05 want three messages, the root without a thread before its first reply exists")
	}
	set(fxBase.Add(3*time.Minute + 10*time.Second))
	got, _ = listAll(t, cli, larktest.ContainerChat, string(fxChat), 50, nil)
	if deref(got[2].ThreadId) != fxThread {
		t.Fatal("at 10:03:10 the first reply exists and the root shows its thread")
	}
	set(fxBase.Add(2 * time.Hour))
	got, _ = listAll(t, cli, larktest.ContainerChat, string(fxChat), 50, nil)
	if len(got) != fxRootCnt || !deref(got[1].Updated) || !deref(got[6].Deleted) {
		t.Fatalf("at 12:00 want all %d with the edit and the recall applied", fxRootCnt)
	}
}

func TestSDKGetMessage(t *testing.T) {
	srv := newServer(t, fixture(t), nil)
	cli := sdkClient(srv, fxSecret)
	tests := []struct {
		name     string
		id       string
		wantCode int
	}{
		{"root message", "om_01", 0},
		{"thread reply", "om_t3", 0},
		{"recalled message", "om_07", 0},
		{"unknown id", "om_nope", larktest.CodeInvalidParam},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := cli.Im.Message.Get(context.Background(), larkim.NewGetMessageReqBuilder().MessageId(tt.id).Build())
			must(t, err)
			if resp.Code != tt.wantCode {
				t.Fatalf("code %d, want %d (%s)", resp.Code, tt.wantCode, resp.Msg)
			}
			if tt.wantCode == 0 && (len(resp.Data.Items) != 1 || deref(resp.Data.Items[0].MessageId) != tt.id) {
				t.Fatalf("items %v", resp.Data.Items)
			}
		})
	}
}

func TestSDKContactBatch(t *testing.T) {
	srv := newServer(t, fixture(t), nil)
	cli := sdkClient(srv, fxSecret)
	resp, err := cli.Contact.User.Batch(context.Background(), larkcontact.NewBatchUserReqBuilder().
		UserIds([]string{fxBob, "ou_unknown", fxAlice}).UserIdType("open_id").Build())
	must(t, err)
	if !resp.Success() {
		t.Fatalf("code %d %s", resp.Code, resp.Msg)
	}
	var names []string
	for _, u := range resp.Data.Items {
		names = append(names, deref(u.OpenId)+"="+deref(u.Name))
	}
	if want := []string{fxBob + "=鲍勃", fxAlice + "=Alice"}; !slices.Equal(names, want) {
		t.Fatalf("users %v, want %v (unknown ids left out)", names, want)
	}

	var many []string
	for range 51 {
		many = append(many, fxAlice)
	}
	resp, err = cli.Contact.User.Batch(context.Background(), larkcontact.NewBatchUserReqBuilder().UserIds(many).UserIdType("open_id").Build())
	must(t, err)
	if resp.Code != larktest.CodeFieldValidation {
		t.Fatalf("51 ids: code %d, want %d", resp.Code, larktest.CodeFieldValidation)
	}

	body := strings.NewReader(`{"user_ids":["ou_alice"]}`)
	raw := rawCall(t, srv, http.MethodPost, larktest.PathUsersBasicBatch, body)
	if !strings.Contains(raw, `"users":[{"user_id":"ou_alice","name":"Alice","i18n_name":{"zh_cn":"Alice","en_us":"Alice A."}}]`) {
		t.Fatalf("basic_batch answer %s", raw)
	}
}

// rawCall makes an authorised request without the SDK and returns the body.
func rawCall(t *testing.T, srv *larktest.Server, method, path string, body io.Reader) string {
	t.Helper()
	tok := tenantToken(t, srv, fxSecret)
	req, err := http.NewRequest(method, srv.URL()+path, body)
	must(t, err)
	req.Header.Set("Authorization", "Bearer "+tok.TenantAccessToken)
	req.Header.Set("Content-Type", "application/json; charset=utf-8")
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	must(t, err)
	return string(b)
}

type tokenAnswer struct {
	Code              int    `json:"code"`
	Msg               string `json:"msg"`
	TenantAccessToken string `json:"tenant_access_token"`
	Expire            int    `json:"expire"`
}

func tenantToken(t *testing.T, srv *larktest.Server, secret string) tokenAnswer {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"app_id": srv.AppID(), "app_secret": secret})
	resp, err := http.Post(srv.URL()+larktest.PathTenantToken, "application/json; charset=utf-8", strings.NewReader(string(body)))
	must(t, err)
	defer resp.Body.Close()
	var a tokenAnswer
	must(t, json.NewDecoder(resp.Body).Decode(&a))
	return a
}

func TestTenantToken(t *testing.T) {
	clock := testenv.NewClock(fxBase)
	srv := newServer(t, fixture(t), func(o *larktest.Options) { o.Now = clock.Now })
	advance := clock.Advance

	first := tenantToken(t, srv, fxSecret)
	if first.Code != 0 || !strings.HasPrefix(first.TenantAccessToken, "t-") || first.Expire != 7200 {
		t.Fatalf("token answer %+v", first)
	}
	advance(time.Hour)
	same := tenantToken(t, srv, fxSecret)
	if same.TenantAccessToken != first.TenantAccessToken || same.Expire != 3600 {
		t.Fatalf("with 1h left want the same token and expire 3600, got %+v", same)
	}
	advance(40 * time.Minute)
	renewed := tenantToken(t, srv, fxSecret)
	if renewed.TenantAccessToken == first.TenantAccessToken || renewed.Expire != 7200 {
		t.Fatalf("with 20m left want a new token, got %+v", renewed)
	}
	if bad := tenantToken(t, srv, "wrong"); bad.Code != larktest.CodeAppCredentialsInvalid || bad.TenantAccessToken != "" {
		t.Fatalf("wrong secret answered %+v", bad)
	}

	// Both tokens work until their own expiry, then 99991663.
	tests := []struct {
		name     string
		header   string
		advance  time.Duration
		wantCode int
	}{
		{"old token still valid", "Bearer " + first.TenantAccessToken, 0, 0},
		{"new token valid", "Bearer " + renewed.TenantAccessToken, 0, 0},
		{"no header", "", 0, larktest.CodeTokenMissing},
		{"not a bearer token", first.TenantAccessToken, 0, larktest.CodeTokenFormat},
		{"unknown token", "Bearer t-unknown", 0, larktest.CodeTenantTokenInvalid},
		{"old token expired", "Bearer " + first.TenantAccessToken, 21 * time.Minute, larktest.CodeTenantTokenInvalid},
		{"new token outlives it", "Bearer " + renewed.TenantAccessToken, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			advance(tt.advance)
			req, _ := http.NewRequest(http.MethodGet, srv.URL()+larktest.PathListMessages+"?container_id_type=chat&container_id=oc_fixture", nil)
			if tt.header != "" {
				req.Header.Set("Authorization", tt.header)
			}
			resp, err := http.DefaultClient.Do(req)
			must(t, err)
			defer resp.Body.Close()
			var a struct {
				Code  int `json:"code"`
				Error struct {
					LogID string `json:"log_id"`
				} `json:"error"`
			}
			must(t, json.NewDecoder(resp.Body).Decode(&a))
			if a.Code != tt.wantCode {
				t.Fatalf("code %d, want %d", a.Code, tt.wantCode)
			}
			if tt.wantCode != 0 && (resp.StatusCode != http.StatusBadRequest || a.Error.LogID == "" || resp.Header.Get("X-Tt-Logid") != a.Error.LogID) {
				t.Fatalf("error answer: status %d log_id %q header %q", resp.StatusCode, a.Error.LogID, resp.Header.Get("X-Tt-Logid"))
			}
		})
	}
}

func TestSDKWithWrongSecretGetsNoToken(t *testing.T) {
	srv := newServer(t, fixture(t), nil)
	cli := sdkClient(srv, "wrong")
	_, err := cli.Im.Message.List(context.Background(), larkim.NewListMessageReqBuilder().ContainerIdType("chat").ContainerId(string(fxChat)).Build())
	var ce larkcore.CodeError
	if !errors.As(err, &ce) || ce.Code != larktest.CodeAppCredentialsInvalid {
		t.Fatalf("err = %v, want CodeError %d", err, larktest.CodeAppCredentialsInvalid)
	}
	if srv.Calls(larktest.PathListMessages) != 0 {
		t.Fatal("the SDK called the API without a token")
	}
}

func TestRevokedTokenAnswers99991663(t *testing.T) {
	srv := newServer(t, fixture(t), nil)
	cli := sdkClient(srv, fxSecret)
	listAll(t, cli, larktest.ContainerChat, string(fxChat), 50, nil)
	srv.RevokeTokens()
	resp, err := cli.Im.Message.List(context.Background(), larkim.NewListMessageReqBuilder().ContainerIdType("chat").ContainerId(string(fxChat)).Build())
	must(t, err)
	if resp.Code != larktest.CodeTenantTokenInvalid {
		t.Fatalf("code %d, want %d", resp.Code, larktest.CodeTenantTokenInvalid)
	}
	// The SDK repeats a request once on 99991663 (with its cached token).
	if n := srv.Calls(larktest.PathListMessages); n != 3 {
		t.Fatalf("list calls %d, want 1 before + 2 after the revocation", n)
	}
}

func TestListParameterErrors(t *testing.T) {
	srv := newServer(t, fixture(t), nil)
	cli := sdkClient(srv, fxSecret)
	first, err := cli.Im.Message.List(context.Background(), larkim.NewListMessageReqBuilder().ContainerIdType("chat").ContainerId(string(fxChat)).PageSize(2).Build())
	must(t, err)
	token := deref(first.Data.PageToken)
	tests := []struct {
		name     string
		build    func(*larkim.ListMessageReqBuilder)
		wantCode int
		wantExt  string
	}{
		{"page_size above 50", func(b *larkim.ListMessageReqBuilder) {
			b.ContainerIdType("chat").ContainerId(string(fxChat)).PageSize(51)
		}, larktest.CodeInvalidParam, "The page_size exceeds the limit"},
		{"page_size 0", func(b *larkim.ListMessageReqBuilder) {
			b.ContainerIdType("chat").ContainerId(string(fxChat)).PageSize(0)
		}, larktest.CodeInvalidParam, "invalid page_size"},
		{"unknown container type", func(b *larkim.ListMessageReqBuilder) { b.ContainerIdType("group").ContainerId(string(fxChat)) }, larktest.CodeInvalidParam, "invalid container_id_type"},
		{"malformed chat id", func(b *larkim.ListMessageReqBuilder) { b.ContainerIdType("chat").ContainerId("chat1") }, larktest.CodeInvalidParam, "invalid container_id"},
		{"chat the bot is not in", func(b *larkim.ListMessageReqBuilder) { b.ContainerIdType("chat").ContainerId("oc_stranger") }, larktest.CodeBotNotInChat, ""},
		{"unknown thread", func(b *larkim.ListMessageReqBuilder) { b.ContainerIdType("thread").ContainerId("omt_nope") }, larktest.CodeInvalidParam, "invalid container_id"},
		{"time range on a thread", func(b *larkim.ListMessageReqBuilder) {
			b.ContainerIdType("thread").ContainerId(fxThread).StartTime("1709287200")
		}, larktest.CodeInvalidParam, "invalid start_time"},
		{"end_time before start_time", func(b *larkim.ListMessageReqBuilder) {
			b.ContainerIdType("chat").ContainerId(string(fxChat)).StartTime("1709287200").EndTime("1709287100")
		}, larktest.CodeInvalidParam, "The end_time is earlier than the start_time"},
		{"non-numeric start_time", func(b *larkim.ListMessageReqBuilder) {
			b.ContainerIdType("chat").ContainerId(string(fxChat)).StartTime("yesterday")
		}, larktest.CodeInvalidParam, "invalid start_time"},
		{"bad sort", func(b *larkim.ListMessageReqBuilder) {
			b.ContainerIdType("chat").ContainerId(string(fxChat)).SortType("ByName")
		}, larktest.CodeInvalidParam, "invalid sort_type"},
		{"garbage page_token", func(b *larkim.ListMessageReqBuilder) {
			b.ContainerIdType("chat").ContainerId(string(fxChat)).PageToken("!!")
		}, larktest.CodeInvalidParam, "invalid page_token"},
		{"page_token with another sort", func(b *larkim.ListMessageReqBuilder) {
			b.ContainerIdType("chat").ContainerId(string(fxChat)).SortType(larktest.SortDesc).PageToken(token)
		}, larktest.CodeInvalidParam, "the request parameters have changed, page_token is invalid"},
		{"page_token with another page size is fine", func(b *larkim.ListMessageReqBuilder) {
			b.ContainerIdType("chat").ContainerId(string(fxChat)).PageSize(7).PageToken(token)
		}, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := larkim.NewListMessageReqBuilder()
			tt.build(b)
			resp, err := cli.Im.Message.List(context.Background(), b.Build())
			must(t, err)
			if resp.Code != tt.wantCode || !strings.Contains(resp.Msg, tt.wantExt) {
				t.Fatalf("code %d msg %q, want %d containing %q", resp.Code, resp.Msg, tt.wantCode, tt.wantExt)
			}
			if tt.wantCode != 0 && resp.StatusCode != http.StatusBadRequest {
				t.Fatalf("status %d, want 400", resp.StatusCode)
			}
		})
	}
}

func TestFailNext(t *testing.T) {
	req := larkim.NewListMessageReqBuilder().ContainerIdType("chat").ContainerId(string(fxChat)).Build
	tests := []struct {
		name       string
		fault      larktest.Fault
		n          int
		wantStatus int
		wantCode   int
		wantErr    bool
		wantReset  string
	}{
		{"rate limit", larktest.FaultRateLimit(2), 2, http.StatusTooManyRequests, larktest.CodeRateLimited, false, "2"},
		{"http 500", larktest.FaultHTTP500(), 1, http.StatusInternalServerError, 500, false, ""},
		{"lark error code", larktest.FaultCode(230027), 1, http.StatusBadRequest, 230027, false, ""},
		{"rate limit with HTTP 400 as older APIs answer", larktest.FaultCode(larktest.CodeRateLimited), 1, http.StatusBadRequest, larktest.CodeRateLimited, false, ""},
		{"gateway timeout", larktest.FaultGatewayTimeout(), 1, 0, 0, true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newServer(t, fixture(t), nil)
			cli := sdkClient(srv, fxSecret)
			must(t, srv.FailNext(larktest.PathListMessages, tt.n, tt.fault))
			for i := range tt.n {
				resp, err := cli.Im.Message.List(context.Background(), req())
				if tt.wantErr {
					var ste *larkcore.ServerTimeoutError
					if !errors.As(err, &ste) {
						t.Fatalf("call %d: err %v, want ServerTimeoutError", i, err)
					}
					continue
				}
				must(t, err)
				if resp.StatusCode != tt.wantStatus || resp.Code != tt.wantCode {
					t.Fatalf("call %d: status %d code %d, want %d %d", i, resp.StatusCode, resp.Code, tt.wantStatus, tt.wantCode)
				}
				if got := resp.Header.Get("X-Ogw-Ratelimit-Reset"); got != tt.wantReset {
					t.Fatalf("reset header %q, want %q", got, tt.wantReset)
				}
			}
			resp, err := cli.Im.Message.List(context.Background(), req())
			must(t, err)
			if !resp.Success() {
				t.Fatalf("after %d faults the next call failed: %d", tt.n, resp.Code)
			}
			if got := srv.Calls(larktest.PathListMessages); got != tt.n+1 {
				t.Fatalf("calls %d, want %d", got, tt.n+1)
			}
		})
	}
}

func TestFailNextValidation(t *testing.T) {
	srv := newServer(t, fixture(t), nil)
	tests := []struct {
		name string
		path string
		n    int
		f    larktest.Fault
	}{
		{"unknown path", "/open-apis/im/v1/chats", 1, larktest.FaultHTTP500()},
		{"n zero", larktest.PathListMessages, 0, larktest.FaultHTTP500()},
		{"no status", larktest.PathListMessages, 1, larktest.Fault{Code: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := srv.FailNext(tt.path, tt.n, tt.f); !errors.Is(err, larktest.ErrInvalidOptions) {
				t.Fatalf("err = %v, want ErrInvalidOptions", err)
			}
		})
	}
}

func TestFaultOnTokenEndpoint(t *testing.T) {
	srv := newServer(t, fixture(t), nil)
	must(t, srv.FailNext(larktest.PathTenantToken, 1, larktest.FaultHTTP500()))
	cli := sdkClient(srv, fxSecret)
	_, err := cli.Im.Message.List(context.Background(), larkim.NewListMessageReqBuilder().ContainerIdType("chat").ContainerId(string(fxChat)).Build())
	if err == nil {
		t.Fatal("list succeeded although the token request failed")
	}
	got, _ := listAll(t, cli, larktest.ContainerChat, string(fxChat), 50, nil)
	if len(got) != fxRootCnt || srv.Calls(larktest.PathTenantToken) != 2 {
		t.Fatalf("after the fault: %d messages, %d token calls", len(got), srv.Calls(larktest.PathTenantToken))
	}
}

func TestOptionsValidation(t *testing.T) {
	sc := fixture(t)
	tests := []struct {
		name string
		opts larktest.Options
	}{
		{"no app id and no scenario", larktest.Options{AppSecret: "s"}},
		{"app id without cli_", larktest.Options{AppID: "app", AppSecret: "s"}},
		{"no secret", larktest.Options{Scenario: sc}},
		{"tiny token ttl", larktest.Options{Scenario: sc, AppSecret: "s", TokenTTL: time.Millisecond}},
		{"negative retry", larktest.Options{Scenario: sc, AppSecret: "s", RetrySchedule: []time.Duration{-1}}},
		{"too many retries", larktest.Options{Scenario: sc, AppSecret: "s", RetrySchedule: make([]time.Duration, 11)}},
		{"negative timeout", larktest.Options{Scenario: sc, AppSecret: "s", CallbackTimeout: -time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := larktest.New(tt.opts); !errors.Is(err, larktest.ErrInvalidOptions) {
				t.Fatalf("err = %v, want ErrInvalidOptions", err)
			}
		})
	}
	srv, err := larktest.New(larktest.Options{Scenario: sc, AppSecret: "s"})
	must(t, err)
	if srv.AppID() != "cli_fixture0000000" || srv.URL() != "" {
		t.Fatalf("app id %q (want the scenario's), URL %q before Start", srv.AppID(), srv.URL())
	}
	must(t, srv.Start())
	if err := srv.Start(); !errors.Is(err, larktest.ErrServerState) {
		t.Fatalf("second Start: %v", err)
	}
	must(t, srv.Close())
	must(t, srv.Close())
	if err := srv.Start(); !errors.Is(err, larktest.ErrServerState) {
		t.Fatalf("Start after Close: %v", err)
	}
}

func TestAddEventShowsInHistory(t *testing.T) {
	srv := newServer(t, fixture(t), nil)
	cli := sdkClient(srv, fxSecret)
	b := larktest.Builder{TenantKey: fxTenant}
	must(t, srv.AddEvent(larktest.DeliverOnce, b.Text(larktest.Msg{ID: "om_late", Chat: fxChat, From: larktest.Author{OpenID: fxAlice}, At: fxBase.Add(20 * time.Minute)}, "late")))
	must(t, srv.AddEdit(larktest.Edit{MessageID: "om_late", UpdateTime: fxBase.Add(21 * time.Minute), Content: `{"text":"later"}`}))
	if err := srv.AddEvent(larktest.DeliverOnce, b.Text(larktest.Msg{ID: "om_late", Chat: fxChat, From: larktest.Author{OpenID: fxAlice}, At: fxBase}, "dup")); !errors.Is(err, larktest.ErrDuplicate) {
		t.Fatalf("re-adding a message: %v", err)
	}
	got, _ := listAll(t, cli, larktest.ContainerChat, string(fxChat), 50, nil)
	last := got[len(got)-1]
	if deref(last.MessageId) != "om_late" || deref(last.Body.Content) != `{"text":"later"}` {
		t.Fatalf("last item %s %s", deref(last.MessageId), deref(last.Body.Content))
	}
	if len(srv.Scenario().Events()) != len(fixture(t).Events())+1 {
		t.Fatal("Scenario() does not reflect the addition")
	}
}

func TestRequestsWithoutSDKUseLarkPaths(t *testing.T) {
	srv := newServer(t, fixture(t), nil)
	q := url.Values{"container_id_type": {"chat"}, "container_id": {string(fxChat)}, "page_size": {"3"}}
	raw := rawCall(t, srv, http.MethodGet, larktest.PathListMessages+"?"+q.Encode(), nil)
	var a struct {
		Code int    `json:"code"`
		Msg  string `json:"msg"`
		Data struct {
			HasMore   bool              `json:"has_more"`
			PageToken string            `json:"page_token"`
			Items     []json.RawMessage `json:"items"`
		} `json:"data"`
	}
	must(t, json.Unmarshal([]byte(raw), &a))
	if a.Code != 0 || a.Msg != "success" || !a.Data.HasMore || a.Data.PageToken == "" || len(a.Data.Items) != 3 {
		t.Fatalf("answer %s", raw)
	}
	// Key order of an item follows Lark's documented answer.
	wantOrder := []string{`"message_id"`, `"msg_type"`, `"create_time"`, `"update_time"`, `"deleted"`, `"updated"`, `"chat_id"`, `"sender"`, `"body"`}
	item := string(a.Data.Items[0])
	last := -1
	for _, k := range wantOrder {
		i := strings.Index(item, k)
		if i <= last {
			t.Fatalf("key %s out of order in %s", k, item)
		}
		last = i
	}
}
