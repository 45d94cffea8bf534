package larktest_test

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	larkim "github.com/larksuite/oapi-sdk-go/v3/service/im/v1"

	"github.com/larkline/larkline/connectors/lark/larktest"
	"github.com/larkline/larkline/internal/testenv"
	"github.com/larkline/larkline/schemas/ids"
)

// randomChat is a chat of n messages over two hours, with threads, quote
// replies and equal create times, built from a fixed seed.
func randomChat(t testing.TB, n int, seed uint64) *larktest.Scenario {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 7))
	sc, err := larktest.NewScenario(larktest.App{AppID: "cli_random", BotOpenID: fxBot})
	must(t, err)
	b := larktest.Builder{TenantKey: fxTenant}
	var roots []larktest.Msg
	threads := map[ids.MessageID]string{}
	for i := range n {
		m := larktest.Msg{
			ID:   ids.MessageID(fmt.Sprintf("om_r%05d", i)),
			Chat: fxChat, From: larktest.Author{OpenID: fxAlice},
			// coarse times so that some messages share a create time
			At: fxBase.Add(time.Duration(r.IntN(7200)) * time.Second),
		}
		switch x := r.IntN(10); {
		case x < 2 && len(roots) > 0:
			root := roots[r.IntN(len(roots))]
			if _, ok := threads[root.ID]; !ok {
				threads[root.ID] = fmt.Sprintf("omt_r%05d", len(threads))
			}
			m.RootID, m.ParentID, m.ThreadID = root.ID, root.ID, threads[root.ID]
			if m.At.Before(root.At) {
				m.At = root.At.Add(time.Second)
			}
		case x < 3 && len(roots) > 0:
			root := roots[r.IntN(len(roots))]
			m.RootID, m.ParentID = root.ID, root.ID
		default:
			roots = append(roots, m)
		}
		must(t, sc.AddEvent(larktest.DeliverOnce, b.Text(m, "x")))
	}
	return sc
}

func TestPagingMatchesBruteForce(t *testing.T) {
	sc := randomChat(t, 400, 1)
	clock := testenv.NewClock(fxBase.Add(3 * time.Hour))
	srv := newServer(t, sc, func(o *larktest.Options) { o.Now = clock.Now })
	cli := sdkClient(srv, fxSecret)
	msgs := sc.Messages()
	r := rand.New(rand.NewPCG(2, 3))
	for q := range 40 {
		at := fxBase.Add(time.Duration(r.IntN(8000)) * time.Second)
		clock.Set(at)
		size := 1 + r.IntN(50)
		desc := r.IntN(2) == 0
		var start, end *int64
		if r.IntN(2) == 0 {
			s := fxBase.Unix() + int64(r.IntN(7200))
			e := s + int64(r.IntN(3600))
			start, end = &s, &e
		}
		thread := ""
		if r.IntN(3) == 0 {
			thread = fmt.Sprintf("omt_r%05d", r.IntN(5))
		}
		t.Run(fmt.Sprintf("query %d", q), func(t *testing.T) {
			var want []string
			var visible []larktest.MessageInfo
			replyVisible := false
			for _, m := range msgs {
				if m.CreateTime.After(at) {
					continue
				}
				if thread == "" {
					if m.ThreadID != "" && m.RootID != "" {
						continue
					}
					sec := m.CreateTime.Unix()
					if start != nil && (sec < *start || sec > *end) {
						continue
					}
				} else if m.ThreadID != thread {
					continue
				} else if m.RootID != "" {
					replyVisible = true
				}
				visible = append(visible, m)
			}
			slices.SortFunc(visible, func(a, b larktest.MessageInfo) int {
				return cmp.Or(a.CreateTime.Compare(b.CreateTime), cmp.Compare(a.ID, b.ID))
			})
			if desc {
				slices.Reverse(visible)
			}
			for _, m := range visible {
				want = append(want, string(m.ID))
			}
			if thread != "" && !replyVisible {
				resp, err := cli.Im.Message.List(t.Context(), larkim.NewListMessageReqBuilder().ContainerIdType("thread").ContainerId(thread).Build())
				must(t, err)
				if resp.Code != larktest.CodeInvalidParam {
					t.Fatalf("thread %s has no reply yet: code %d, want %d", thread, resp.Code, larktest.CodeInvalidParam)
				}
				return
			}
			typ, id := larktest.ContainerChat, string(fxChat)
			if thread != "" {
				typ, id = larktest.ContainerThread, thread
			}
			got, pages := listAll(t, cli, typ, id, size, func(b *larkim.ListMessageReqBuilder) {
				if desc {
					b.SortType(larktest.SortDesc)
				}
				if start != nil && thread == "" {
					b.StartTime(fmt.Sprint(*start)).EndTime(fmt.Sprint(*end))
				}
			})
			if ids := messageIDs(got); !slices.Equal(ids, want) {
				t.Fatalf("now %s size %d desc %v range %v: got %d ids, want %d\n got %v\nwant %v", at.Format(time.TimeOnly), size, desc, start != nil, len(ids), len(want), ids, want)
			}
			if wantPages := max(1, (len(want)+size-1)/size); pages != wantPages {
				t.Fatalf("%d pages, want %d", pages, wantPages)
			}
		})
	}
}

// BenchmarkListPage measures one history page of 50 from the middle of a
// chat of 20,000 messages, through the real SDK.
func BenchmarkListPage(b *testing.B) {
	sc := randomChat(b, benchMessages, 9)
	srv := newServer(b, sc, nil)
	cli := sdkClient(srv, fxSecret)
	first, err := cli.Im.Message.List(b.Context(), larkim.NewListMessageReqBuilder().ContainerIdType("chat").ContainerId(string(fxChat)).PageSize(50).Build())
	must(b, err)
	for range 100 {
		first, err = cli.Im.Message.List(b.Context(), larkim.NewListMessageReqBuilder().ContainerIdType("chat").ContainerId(string(fxChat)).PageSize(50).PageToken(deref(first.Data.PageToken)).Build())
		must(b, err)
	}
	req := larkim.NewListMessageReqBuilder().ContainerIdType("chat").ContainerId(string(fxChat)).PageSize(50).PageToken(deref(first.Data.PageToken)).Build()
	b.ResetTimer()
	for b.Loop() {
		resp, err := cli.Im.Message.List(b.Context(), req)
		if err != nil || len(resp.Data.Items) != 50 {
			b.Fatalf("err %v items %d", err, len(resp.Data.Items))
		}
	}
}

const benchMessages = 20000
