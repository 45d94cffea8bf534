package reconcile

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/larkline/larkline/connectors/lark/larkapi"
	"github.com/larkline/larkline/connectors/lark/larktest"
	"github.com/larkline/larkline/schemas/ids"
)

// TestLarkHistory drives larkapi.Client.ListMessages against larktest: paging, the wire
// format of the query, and how each kind of Lark answer comes back.
func TestLarkHistory(t *testing.T) {
	const chat = ids.ChatID("oc_hist")
	l := newLark(t, chat)
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	for i := range 7 {
		l.say(t, larktest.DeliverOnce, larktest.Msg{ID: msgID("hist", i), Chat: chat, At: base.Add(1200*time.Millisecond + time.Duration(i)*time.Minute)}, "m")
	}
	h, err := larkapi.New(l.client)
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxTimeout(t)

	t.Run("pages until has_more is false", func(t *testing.T) {
		q := larkapi.ListQuery{ContainerType: larkapi.ContainerChat, ContainerID: string(chat), Start: base.Add(1500 * time.Millisecond), End: base.Add(time.Hour), PageSize: 3}
		var got []string
		for pages := 0; ; pages++ {
			if pages > 5 {
				t.Fatal("pagination does not end")
			}
			p, err := h.ListMessages(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			for _, it := range p.Items {
				got = append(got, *it.MessageId)
			}
			if !p.HasMore {
				if p.PageToken != "" {
					t.Fatalf("last page has token %q", p.PageToken)
				}
				break
			}
			q.PageToken = p.PageToken
		}
		if len(got) != 7 || got[0] != string(msgID("hist", 0)) {
			t.Fatalf("items %v: start_time must be sent in whole seconds, rounded down", got)
		}
		calls := l.calls()
		first := calls[len(calls)-3]
		if first.start == nil || *first.start != sec(base)+1 || first.end == nil || *first.end != sec(base.Add(time.Hour)) ||
			first.sort != "ByCreateTimeAsc" || first.pageSize != 3 || first.container != larkapi.ContainerChat {
			t.Fatalf("query on the wire: %+v", first)
		}
	})

	tests := []struct {
		name      string
		fault     larktest.Fault
		outcome   string
		retryable bool
		after     time.Duration
	}{
		{"rate limit", larktest.FaultRateLimit(7), outcomeRateLimited, true, 7 * time.Second},
		{"server error", larktest.FaultHTTP500(), outcomeServerError, true, 0},
		{"gateway timeout", larktest.FaultGatewayTimeout(), outcomeServerError, true, 0},
		{"bot not in chat", larktest.FaultCode(larktest.CodeBotNotInChat), outcomeRefused, false, 0},
		{"old-style rate limit", larktest.FaultCode(larktest.CodeRateLimited), outcomeRateLimited, true, time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := l.srv.FailNext(larktest.PathListMessages, 1, tt.fault); err != nil {
				t.Fatal(err)
			}
			_, err := h.ListMessages(ctx, larkapi.ListQuery{ContainerType: larkapi.ContainerChat, ContainerID: string(chat), PageSize: 5})
			if err == nil {
				t.Fatal("no error")
			}
			if got := apiOutcome(err); got != tt.outcome {
				t.Errorf("outcome %q, want %q (%v)", got, tt.outcome, err)
			}
			if got := IsRetryable(err); got != tt.retryable {
				t.Errorf("retryable %v, want %v (%v)", got, tt.retryable, err)
			}
			var ae *larkapi.APIError
			if errors.As(err, &ae) && ae.RetryAfter != tt.after {
				t.Errorf("RetryAfter %s, want %s", ae.RetryAfter, tt.after)
			}
		})
	}

	t.Run("queries Lark would refuse are not sent", func(t *testing.T) {
		before := len(l.calls())
		for _, q := range []larkapi.ListQuery{
			{ContainerType: larkapi.ContainerThread, ContainerID: "omt_x", Start: base, PageSize: 5},
			{ContainerType: larkapi.ContainerChat, ContainerID: string(chat), PageSize: 0},
			{ContainerType: larkapi.ContainerChat, ContainerID: string(chat), PageSize: 51},
			{ContainerType: "p2p", ContainerID: string(chat), PageSize: 5},
			{ContainerType: larkapi.ContainerChat, ContainerID: string(chat), Start: base, End: base.Add(-time.Hour), PageSize: 5},
		} {
			if _, err := h.ListMessages(context.Background(), q); !errors.Is(err, larkapi.ErrInvalidQuery) || IsRetryable(err) {
				t.Errorf("%+v: %v, want larkapi.ErrInvalidQuery", q, err)
			}
		}
		if n := len(l.calls()) - before; n != 0 {
			t.Fatalf("%d requests sent", n)
		}
	})

	if _, err := larkapi.New(nil); !errors.Is(err, larkapi.ErrInvalidOptions) {
		t.Fatalf("larkapi.New(nil) = %v", err)
	}
}
