package larktest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/larkline/larkline/connectors/lark/larktest"
)

func TestBundledIncidentScenario(t *testing.T) {
	sc, err := larktest.Incident()
	must(t, err)
	ws := sc.Workspaces()
	if len(ws) != 1 || ws[0].Status != "firing" || ws[0].Type != "incident" {
		t.Fatalf("workspaces %+v", ws)
	}
	b := sc.Bindings()
	if len(b) != 1 || b[0].WorkspaceID != ws[0].ID {
		t.Fatalf("bindings %+v", b)
	}
	if n := len(sc.Users()); n < 5 || n > 7 {
		t.Fatalf("%d users, want 5-7", n)
	}
	msgs := sc.Messages()
	first, last := msgs[0].CreateTime, msgs[0].CreateTime
	types := map[string]int{}
	threads := map[string]int{}
	var twice, drop, recalled, edited, fromApp, quoted, chinese int
	var text strings.Builder
	for _, m := range msgs {
		if m.ChatID != b[0].ChatID {
			t.Fatalf("message %s outside the bound chat", m.ID)
		}
		first, last = minTime(first, m.CreateTime), maxTime(last, m.CreateTime)
		types[m.Type]++
		if m.ThreadID != "" {
			threads[m.ThreadID]++
		}
		if m.RootID != "" && m.ThreadID == "" {
			quoted++
		}
		switch m.Deliver {
		case larktest.DeliverTwice:
			twice++
		case larktest.DeliverDrop:
			drop++
		}
		if m.Recalled {
			recalled++
		}
		edited += m.Edits
		if m.FromApp {
			fromApp++
		}
	}
	for _, e := range sc.Events() {
		text.Write(e.Body)
		if strings.ContainsAny(string(e.Body), "收到好的主库") {
			chinese++
		}
	}
	created := ws[0].CreatedAt
	span := last.Sub(first)
	checks := []struct {
		name string
		ok   bool
	}{
		{"a few hundred messages", len(msgs) >= 200 && len(msgs) <= 400},
		{"about four hours", span > 3*time.Hour+30*time.Minute && span < 4*time.Hour+30*time.Minute},
		{"workspace created shortly before the first message", created.Before(first) && first.Sub(created) < 10*time.Minute},
		{"exactly one twice event", twice == 1},
		{"exactly one drop event", drop == 1},
		{"one recall", recalled == 1},
		{"several edits", edited >= 3},
		{"at least two threads with replies", len(threads) >= 2},
		{"quote replies", quoted >= 5},
		{"bot cards from our app", fromApp >= 3 && types["interactive"] == fromApp},
		{"images and files", types["image"] >= 2 && types["file"] >= 1},
		{"a post with a code block", types["post"] >= 1 && strings.Contains(text.String(), `\"tag\":\"code_block\"`)},
		{"Chinese messages", chinese >= 10},
		{"the impact statement", strings.Contains(text.String(), "checkout error rate 35% in eu-west")},
		{"a decision and an ownership change", strings.Contains(text.String(), "Decision: roll back") && strings.Contains(text.String(), "is IC from now")},
		{"root cause and recovery", strings.Contains(text.String(), "Root cause") && strings.Contains(text.String(), "Recovery confirmed")},
		{"bare links", strings.Contains(text.String(), `{\"text\":\"https://`)},
		{"acks", strings.Contains(text.String(), `{\"text\":\"+1\"}`) && strings.Contains(text.String(), `{\"text\":\"收到\"}`)},
	}
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			if !c.ok {
				t.Fatal("not in the bundled scenario")
			}
		})
	}
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func TestBundledIncidentServedAndDelivered(t *testing.T) {
	sc, err := larktest.Incident()
	must(t, err)
	sc, d, err := sc.ShiftBefore(time.Now(), 10*time.Minute)
	must(t, err)
	if d%(10*time.Minute) != 0 {
		t.Fatalf("shift %s is not whole windows", d)
	}
	srv := newServer(t, sc, func(o *larktest.Options) { o.Now = time.Now })
	cli := sdkClient(srv, fxSecret)
	chat := string(sc.Bindings()[0].ChatID)
	items, _ := listAll(t, cli, larktest.ContainerChat, chat, 50, nil)
	var roots, inThreads int
	threads := map[string]bool{}
	for _, m := range sc.Messages() {
		if m.ThreadID != "" && m.RootID != "" {
			inThreads++
			threads[m.ThreadID] = true
		} else {
			roots++
		}
	}
	if len(items) != roots {
		t.Fatalf("chat container lists %d, want the %d messages that are not thread replies", len(items), roots)
	}
	for th := range threads {
		got, _ := listAll(t, cli, larktest.ContainerThread, th, 50, nil)
		inThreads -= len(got) - 1 // minus the root
	}
	if inThreads != 0 {
		t.Fatalf("%d thread replies not found in thread containers", inThreads)
	}

	wh := newWebhook(t, fxToken, fxKey)
	rep, err := srv.Deliver(context.Background(), wh.srv.URL)
	must(t, err)
	got, _, recalls := wh.received()
	if want := len(sc.Messages()) - 1 + 1; len(got) != want || len(recalls) != 1 {
		t.Fatalf("webhook got %d messages and %d recalls, want %d (all but the dropped one, plus the duplicate) and 1", len(got), len(recalls), want)
	}
	if rep.Posts() != len(got)+len(recalls) {
		t.Fatalf("%d posts for %d callbacks", rep.Posts(), len(got)+len(recalls))
	}
}
