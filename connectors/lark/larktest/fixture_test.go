package larktest_test

import (
	"fmt"
	"testing"
	"time"

	lark "github.com/larksuite/oapi-sdk-go/v3"

	"github.com/larkline/larkline/connectors/lark/larktest"
	"github.com/larkline/larkline/schemas/ids"
)

const (
	fxBot     = "ou_fixturebot"
	fxAlice   = "ou_alice"
	fxBob     = "ou_bob"
	fxChat    = ids.ChatID("oc_fixture")
	fxOther   = ids.ChatID("oc_unbound")
	fxThread  = "omt_fixture1"
	fxWS      = ids.WorkspaceID("ws-1")
	fxSecret  = "s3cret"
	fxToken   = "vtoken-fixture"
	fxKey     = "encrypt-key-fixture"
	fxTenant  = "736588c9260f175e"
	fxRootCnt = 12 // root-level messages in fxChat
)

var fxBase = time.Date(2024, 3, 1, 10, 0, 0, 0, time.UTC)

func fxID(i int) ids.MessageID    { return ids.MessageID(fmt.Sprintf("om_%02d", i)) }
func fxReply(i int) ids.MessageID { return ids.MessageID(fmt.Sprintf("om_t%d", i)) }

// fixture is a small chat: twelve root messages a minute apart (m03 is the
// root of a thread with four replies, m04 is a bot card, m06 quotes m05, m08
// is a post, m09 an image), an edit of m02, a recall of m07, m10 delivered
// twice, m11 dropped, and one message in an unbound chat.
func fixture(t testing.TB) *larktest.Scenario {
	t.Helper()
	sc := larktest.IncidentForTest(t, larktest.App{AppID: "cli_fixture0000000", BotOpenID: fxBot}, fxWS, fxBase.Add(-time.Minute), fxChat)
	must(t, sc.AddUser(larktest.User{OpenID: fxAlice, Name: "Alice", EnName: "Alice A.", UnionID: "on_alice", UserID: "alice01"}))
	must(t, sc.AddUser(larktest.User{OpenID: fxBob, Name: "鲍勃"}))
	b := larktest.Builder{AppID: "cli_fixture0000000", TenantKey: fxTenant, Token: "file-token"}
	msg := func(i int) larktest.Msg {
		who := fxAlice
		if i%2 == 0 {
			who = fxBob
		}
		return larktest.Msg{ID: fxID(i), Chat: fxChat, From: larktest.Author{OpenID: who}, At: fxBase.Add(time.Duration(i) * time.Minute)}
	}
	for i := 1; i <= fxRootCnt; i++ {
		m := msg(i)
		d := larktest.DeliverOnce
		var env larktest.Envelope
		switch i {
		case 4:
			m.From = larktest.Author{OpenID: fxBot, Type: larktest.SenderTypeBot}
			env = b.Card(m, "Incident created", []larktest.Elem{larktest.TextElem("SEV2")})
		case 6:
			m.RootID, m.ParentID = fxID(5), fxID(5)
			m.Mentions = []larktest.Mention{{Key: "@_user_1", OpenID: fxAlice, Name: "Alice"}}
			env = b.Text(m, "@_user_1 agreed")
		case 8:
			env = b.Post(m, "Findings", []larktest.Elem{larktest.TextElem("pool size "), larktest.CodeElem("GO", "max := 200")})
		case 9:
			env = b.Image(m, "img_v3_fixture")
		default:
			env = b.Text(m, fmt.Sprintf("message %d", i))
		}
		switch i {
		case 10:
			d = larktest.DeliverTwice
		case 11:
			d = larktest.DeliverDrop
		}
		must(t, sc.AddEvent(d, env))
		if i == 3 {
			for r := 1; r <= 4; r++ {
				rm := larktest.Msg{
					ID: fxReply(r), Chat: fxChat, From: larktest.Author{OpenID: fxBob},
					At:     fxBase.Add(3*time.Minute + time.Duration(r)*10*time.Second),
					RootID: fxID(3), ParentID: fxID(3), ThreadID: fxThread,
				}
				must(t, sc.AddEvent(larktest.DeliverOnce, b.Text(rm, fmt.Sprintf("reply %d", r))))
			}
		}
	}
	must(t, sc.AddEvent(larktest.DeliverOnce, b.Text(larktest.Msg{ID: "om_elsewhere", Chat: fxOther, From: larktest.Author{OpenID: fxAlice}, At: fxBase}, "elsewhere")))
	must(t, sc.AddEdit(larktest.Edit{MessageID: fxID(2), UpdateTime: fxBase.Add(30 * time.Minute), Content: `{"text":"message 2 (edited)"}`}))
	must(t, sc.AddEvent(larktest.DeliverOnce, b.Recall(fxID(7), fxChat, fxBase.Add(31*time.Minute), "")))
	return sc
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// newServer starts a server for sc. Every server gets its own app id: the
// SDK's token cache is process-wide and keyed by app id.
func newServer(t testing.TB, sc *larktest.Scenario, mod func(*larktest.Options)) *larktest.Server {
	t.Helper()
	opts := larktest.Options{
		AppID:             larktest.NewAppID(),
		AppSecret:         fxSecret,
		VerificationToken: fxToken,
		EncryptKey:        fxKey,
		Scenario:          sc,
		Now:               func() time.Time { return fxBase.Add(time.Hour) },
		RetrySchedule:     []time.Duration{time.Millisecond, time.Millisecond, time.Millisecond, time.Millisecond},
	}
	if mod != nil {
		mod(&opts)
	}
	srv, err := larktest.New(opts)
	must(t, err)
	must(t, srv.Start())
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return srv
}

func sdkClient(srv *larktest.Server, secret string) *lark.Client {
	return lark.NewClient(srv.AppID(), secret, lark.WithOpenBaseUrl(srv.URL()), lark.WithLogger(quietLogger{}))
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
