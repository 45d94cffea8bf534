package larktest_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/larkline/larkline/connectors/lark/larktest"
	"github.com/larkline/larkline/schemas/ids"
)

// validHead is a scenario prefix of five good lines.
const validHead = `{"kind":"app","app_id":"cli_x","bot_open_id":"ou_bot"}
{"kind":"workspace","id":"ws-1","type":"incident","status":"firing","created_at":"2024-03-01T09:59:00Z"}
{"kind":"binding","workspace_id":"ws-1","chat_id":"oc_x"}
{"kind":"user","open_id":"ou_a","name":"A"}
{"kind":"event","deliver":"once","body":{"schema":"2.0","header":{"event_id":"e1","event_type":"im.message.receive_v1","create_time":"1709287200000"},"event":{"sender":{"sender_id":{"open_id":"ou_a"},"sender_type":"user"},"message":{"message_id":"om_1","create_time":"1709287200000","chat_id":"oc_x","chat_type":"group","message_type":"text","content":"{\"text\":\"hi\"}"}}}}
`

// receiveLine is an event line with one message field replaced.
func receiveLine(deliver, eventID, eventType, createTime string, msg map[string]any) string {
	m := map[string]any{"message_id": "om_2", "create_time": "1709287260000", "chat_id": "oc_x", "chat_type": "group", "message_type": "text", "content": `{"text":"x"}`}
	for k, v := range msg {
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
	}
	body := map[string]any{
		"schema": "2.0",
		"header": map[string]any{"event_id": eventID, "event_type": eventType, "create_time": createTime},
		"event":  map[string]any{"sender": map[string]any{"sender_id": map[string]any{"open_id": "ou_a"}, "sender_type": "user"}, "message": m},
	}
	line := map[string]any{"kind": "event", "body": body}
	if deliver != "" {
		line["deliver"] = deliver
	}
	b, _ := json.Marshal(line)
	return string(b)
}

func TestParseReportsTheBadLine(t *testing.T) {
	tests := []struct {
		name string
		line string
		want error
	}{
		{"not JSON", `{"kind":`, larktest.ErrBadValue},
		{"no kind", `{"deliver":"once"}`, larktest.ErrMissingField},
		{"unknown kind", `{"kind":"channel","id":"x"}`, larktest.ErrUnknownKind},
		{"second app", `{"kind":"app","app_id":"cli_y","bot_open_id":"ou_y"}`, larktest.ErrDuplicate},
		{"workspace without created_at", `{"kind":"workspace","id":"ws-2","type":"incident","status":"firing"}`, larktest.ErrMissingField},
		{"workspace with a bad time", `{"kind":"workspace","id":"ws-2","type":"incident","status":"firing","created_at":"yesterday"}`, larktest.ErrBadTime},
		{"workspace with a bad id", `{"kind":"workspace","id":"ws 2","type":"incident","status":"firing","created_at":"2024-03-01T09:59:00Z"}`, ids.ErrInvalidID},
		{"duplicate workspace", `{"kind":"workspace","id":"ws-1","type":"incident","status":"firing","created_at":"2024-03-01T09:59:00Z"}`, larktest.ErrDuplicate},
		{"binding to an undeclared workspace", `{"kind":"binding","workspace_id":"ws-9","chat_id":"oc_x"}`, larktest.ErrUnknownTarget},
		{"binding with a bad chat id", `{"kind":"binding","workspace_id":"ws-1","chat_id":"chat-x"}`, ids.ErrInvalidID},
		{"user without name", `{"kind":"user","open_id":"ou_b"}`, larktest.ErrMissingField},
		{"user with a bad open_id", `{"kind":"user","open_id":"u_b","name":"B"}`, larktest.ErrBadValue},
		{"event without deliver", receiveLine("", "e2", larktest.EventTypeMessageReceive, "1709287260000", nil), larktest.ErrMissingField},
		{"event with deliver thrice", receiveLine("thrice", "e2", larktest.EventTypeMessageReceive, "1709287260000", nil), larktest.ErrBadValue},
		{"event without body", `{"kind":"event","deliver":"once"}`, larktest.ErrMissingField},
		{"event of another type", receiveLine("once", "e2", "im.chat.updated_v1", "1709287260000", nil), larktest.ErrEventType},
		{"header time in seconds", receiveLine("once", "e2", larktest.EventTypeMessageReceive, "1709287260", nil), larktest.ErrBadTime},
		{"message time not a number", receiveLine("once", "e2", larktest.EventTypeMessageReceive, "1709287260000", map[string]any{"create_time": "noon"}), larktest.ErrBadTime},
		{"message without message_id", receiveLine("once", "e2", larktest.EventTypeMessageReceive, "1709287260000", map[string]any{"message_id": nil}), larktest.ErrMissingField},
		{"message without content", receiveLine("once", "e2", larktest.EventTypeMessageReceive, "1709287260000", map[string]any{"content": nil}), larktest.ErrMissingField},
		{"message id without om_", receiveLine("once", "e2", larktest.EventTypeMessageReceive, "1709287260000", map[string]any{"message_id": "m2"}), ids.ErrInvalidID},
		{"message received twice", receiveLine("once", "e2", larktest.EventTypeMessageReceive, "1709287260000", map[string]any{"message_id": "om_1"}), larktest.ErrDuplicate},
		{"event_id reused", receiveLine("once", "e1", larktest.EventTypeMessageReceive, "1709287260000", nil), larktest.ErrDuplicate},
		{"thread id without omt_", receiveLine("once", "e2", larktest.EventTypeMessageReceive, "1709287260000", map[string]any{"thread_id": "t1"}), larktest.ErrBadValue},
		{"parent without root", receiveLine("once", "e2", larktest.EventTypeMessageReceive, "1709287260000", map[string]any{"parent_id": "om_1"}), larktest.ErrMissingField},
		{"update before create", receiveLine("once", "e2", larktest.EventTypeMessageReceive, "1709287260000", map[string]any{"update_time": "1709287000000"}), larktest.ErrBadTime},
		{"schema 1.0", `{"kind":"event","deliver":"once","body":{"schema":"1.0","header":{"event_id":"e2","event_type":"im.message.receive_v1","create_time":"1709287260000"},"event":{}}}`, larktest.ErrBadValue},
		{"v1 envelope", `{"kind":"event","deliver":"once","body":{"uuid":"u","event":{"type":"message"}}}`, larktest.ErrMissingField},
		{"recall of an unknown message", `{"kind":"event","deliver":"once","body":{"schema":"2.0","header":{"event_id":"e2","event_type":"im.message.recalled_v1","create_time":"1709287260000"},"event":{"message_id":"om_9","chat_id":"oc_x","recall_time":"1709287260000","recall_type":"message_owner"}}}`, larktest.ErrUnknownTarget},
		{"recall in another chat", `{"kind":"event","deliver":"once","body":{"schema":"2.0","header":{"event_id":"e2","event_type":"im.message.recalled_v1","create_time":"1709287260000"},"event":{"message_id":"om_1","chat_id":"oc_y","recall_time":"1709287260000","recall_type":"message_owner"}}}`, larktest.ErrBadValue},
		{"recall before the message", `{"kind":"event","deliver":"once","body":{"schema":"2.0","header":{"event_id":"e2","event_type":"im.message.recalled_v1","create_time":"1709287260000"},"event":{"message_id":"om_1","chat_id":"oc_x","recall_time":"1709287100000","recall_type":"message_owner"}}}`, larktest.ErrBadTime},
		{"edit of an unknown message", `{"kind":"edit","message_id":"om_9","update_time":"1709287260000","content":"{\"text\":\"y\"}"}`, larktest.ErrUnknownTarget},
		{"edit with a bad time", `{"kind":"edit","message_id":"om_1","update_time":"2024-03-01T10:01:00Z","content":"{\"text\":\"y\"}"}`, larktest.ErrBadTime},
		{"edit before the message", `{"kind":"edit","message_id":"om_1","update_time":"1709287100000","content":"{\"text\":\"y\"}"}`, larktest.ErrBadTime},
		{"edit content not JSON", `{"kind":"edit","message_id":"om_1","update_time":"1709287260000","content":"y"}`, larktest.ErrBadValue},
		{"edit without content", `{"kind":"edit","message_id":"om_1","update_time":"1709287260000"}`, larktest.ErrMissingField},
		{"edit time as a number", `{"kind":"edit","message_id":"om_1","update_time":1709287260000,"content":"{}"}`, larktest.ErrBadValue},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sc, err := larktest.Parse(strings.NewReader(validHead + "\n" + tt.line + "\n"))
			if sc != nil || !errors.Is(err, larktest.ErrInvalidScenario) || !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want ErrInvalidScenario and %v", err, tt.want)
			}
			var le *larktest.LineError
			if !errors.As(err, &le) || le.Line != 7 || !strings.Contains(err.Error(), "scenario line 7") {
				t.Fatalf("err = %v, want it to name line 7 (blank line 6 counts)", err)
			}
		})
	}
}

func TestParseReportsEveryBadLine(t *testing.T) {
	in := validHead + `{"kind":"nope"}
{"kind":"user","open_id":"ou_b","name":"B"}
{"kind":"edit","message_id":"om_9","update_time":"1709287260000","content":"{}"}
`
	_, err := larktest.Parse(strings.NewReader(in))
	var lines []int
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		var le *larktest.LineError
		if errors.As(e, &le) {
			lines = append(lines, le.Line)
		}
	}
	if !slices.Equal(lines, []int{6, 8}) {
		t.Fatalf("bad lines reported %v, want [6 8] (err: %v)", lines, err)
	}
}

func TestParseNeedsAnApp(t *testing.T) {
	_, err := larktest.Parse(strings.NewReader(`{"kind":"user","open_id":"ou_a","name":"A"}`))
	var le *larktest.LineError
	if !errors.As(err, &le) || le.Line != 0 || !errors.Is(err, larktest.ErrMissingField) {
		t.Fatalf("err = %v, want a scenario-level missing app", err)
	}
	if _, err := larktest.NewScenario(larktest.App{AppID: "x", BotOpenID: "ou_x"}); !errors.Is(err, larktest.ErrBadValue) {
		t.Fatalf("app id without cli_: %v", err)
	}
}

func TestParseAcceptsOtherFieldsAndBlankLines(t *testing.T) {
	in := strings.Replace(validHead, `"name":"A"}`, `"name":"A","department":"sre"}`, 1) + "\n\n"
	sc, err := larktest.Parse(strings.NewReader(in))
	must(t, err)
	if len(sc.Messages()) != 1 || sc.Users()[0].Name != "A" {
		t.Fatal("scenario not loaded")
	}
}

func TestDocumentedSamplesLoad(t *testing.T) {
	samples := filepath.Join("..", "..", "..", "..", "shared", "spec", "reference", "lark-samples")
	for _, f := range []string{
		"event_receive_v1_text_group_docs.json",
		"event_receive_v1_text_group_mention_real_microjservice.json",
		"event_recalled_v1_docs.json",
	} {
		t.Run(f, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join(samples, f))
			if err != nil {
				t.Fatalf("the shared samples must be present (../shared from the project root): %v", err)
			}
			sc, err := larktest.NewScenario(larktest.App{AppID: "cli_9f5343c580712544", BotOpenID: "ou_bot"})
			must(t, err)
			// The recall sample recalls om_dc13…; receive it first.
			must(t, sc.AddEvent(larktest.DeliverOnce, larktest.Builder{}.Text(larktest.Msg{
				ID: "om_dc13264520392913993dd051dba21dcf", Chat: "oc_5ad11d72b830411d72b836c20",
				From: larktest.Author{OpenID: "ou_x"}, At: time.UnixMilli(1615380573000),
			}, "x")))
			must(t, sc.AddRawEvent(larktest.DeliverOnce, raw))
			if n := len(sc.Events()); n != 2 {
				t.Fatalf("%d events", n)
			}
		})
	}
}

func TestBuilderMatchesTheDocumentedEnvelope(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "shared", "spec", "reference", "lark-samples", "event_receive_v1_text_group_docs.json"))
	must(t, err)
	var doc map[string]any
	must(t, json.Unmarshal(raw, &doc))
	env := larktest.Builder{AppID: "cli_9f5343c580712544", TenantKey: "2ca1d211f64f6438", Token: "t"}.Text(larktest.Msg{
		ID: "om_1", Chat: "oc_1", From: larktest.Author{OpenID: "ou_1", UnionID: "on_1", UserID: "u1"},
		At: time.UnixMilli(1609073151345), RootID: "om_0", ParentID: "om_0", ThreadID: "omt_1",
		Mentions: []larktest.Mention{{Key: "@_user_1", OpenID: "ou_2", UnionID: "on_2", UserID: "u2", Name: "Tom"}},
	}, "@_user_1 hello")
	b, err := env.JSON()
	must(t, err)
	var got map[string]any
	must(t, json.Unmarshal(b, &got))
	// The 2026 doc sample adds fields SDK v3.5.1 does not know.
	delete(doc["event"].(map[string]any)["message"].(map[string]any), "user_agent")
	delete(doc["event"].(map[string]any)["message"].(map[string]any)["mentions"].([]any)[0].(map[string]any), "mentioned_type")
	if w, g := keyPaths("", doc), keyPaths("", got); !slices.Equal(w, g) {
		t.Fatalf("builder keys differ from the documented envelope\n got %v\nwant %v", g, w)
	}
	if !strings.Contains(string(b), `"content":"{\"text\":\"@_user_1 hello\"}"`) {
		t.Fatalf("content %s", b)
	}

	rc, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "shared", "spec", "reference", "lark-samples", "event_recalled_v1_docs.json"))
	must(t, err)
	var rdoc, rgot map[string]any
	must(t, json.Unmarshal(rc, &rdoc))
	rb, err := larktest.Builder{}.Recall("om_1", "oc_1", time.UnixMilli(1615380573411), "").JSON()
	must(t, err)
	must(t, json.Unmarshal(rb, &rgot))
	if w, g := keyPaths("", rdoc), keyPaths("", rgot); !slices.Equal(w, g) {
		t.Fatalf("recall keys differ\n got %v\nwant %v", g, w)
	}
}

// keyPaths lists every object key path of v, sorted.
func keyPaths(prefix string, v any) []string {
	var out []string
	switch x := v.(type) {
	case map[string]any:
		for k, c := range x {
			out = append(out, prefix+"."+k)
			out = append(out, keyPaths(prefix+"."+k, c)...)
		}
	case []any:
		for _, c := range x {
			out = append(out, keyPaths(prefix+"[]", c)...)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func TestWriteToRoundTrips(t *testing.T) {
	sc := fixture(t)
	var a bytes.Buffer
	_, err := sc.WriteTo(&a)
	must(t, err)
	back, err := larktest.Parse(bytes.NewReader(a.Bytes()))
	must(t, err)
	var b bytes.Buffer
	_, err = back.WriteTo(&b)
	must(t, err)
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatal("WriteTo(Parse(WriteTo(s))) differs from WriteTo(s)")
	}
	if !reflect.DeepEqual(back.Messages(), sc.Messages()) {
		t.Fatal("messages differ after a round trip")
	}
}

func TestShift(t *testing.T) {
	sc := fixture(t)
	first, last := sc.Bounds()
	if !first.Equal(fxBase.Add(-time.Minute)) || !last.Equal(fxBase.Add(31*time.Minute)) {
		t.Fatalf("bounds %s..%s", first, last)
	}
	shifted, err := sc.Shift(90 * time.Minute)
	must(t, err)
	f2, l2 := shifted.Bounds()
	if f2.Sub(first) != 90*time.Minute || l2.Sub(last) != 90*time.Minute {
		t.Fatalf("shifted bounds %s..%s", f2, l2)
	}
	if got := shifted.Workspaces()[0].CreatedAt; !got.Equal(sc.Workspaces()[0].CreatedAt.Add(90 * time.Minute)) {
		t.Fatalf("workspace created_at %s", got)
	}
	orig, moved := sc.Messages(), shifted.Messages()
	for i := range orig {
		if moved[i].CreateTime.Sub(orig[i].CreateTime) != 90*time.Minute || moved[i].ID != orig[i].ID {
			t.Fatalf("message %s moved by %s", orig[i].ID, moved[i].CreateTime.Sub(orig[i].CreateTime))
		}
		if orig[i].Recalled && moved[i].RecallTime.Sub(orig[i].RecallTime) != 90*time.Minute {
			t.Fatal("recall time not shifted")
		}
	}
	if e := shifted.Edits()[0]; !e.UpdateTime.Equal(sc.Edits()[0].UpdateTime.Add(90 * time.Minute)) {
		t.Fatal("edit not shifted")
	}
	for i, e := range shifted.Events() {
		var v struct {
			Header struct {
				CreateTime string `json:"create_time"`
			} `json:"header"`
		}
		must(t, json.Unmarshal(e.Body, &v))
		var o struct {
			Header struct {
				CreateTime string `json:"create_time"`
			} `json:"header"`
		}
		must(t, json.Unmarshal(sc.Events()[i].Body, &o))
		if v.Header.CreateTime == o.Header.CreateTime {
			t.Fatalf("event %d header.create_time not shifted", i)
		}
	}

	tests := []struct {
		name string
		now  time.Time
		unit time.Duration
	}{
		{"scenario in the past moves forward", fxBase.Add(1000 * time.Hour), 10 * time.Minute},
		{"scenario in the future moves back", fxBase.Add(-1000 * time.Hour), 10 * time.Minute},
		{"now exactly a whole unit after the end", last.Add(30 * time.Minute), 10 * time.Minute},
		{"hour units", fxBase.Add(7*time.Hour + 3*time.Minute), time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, d, err := sc.ShiftBefore(tt.now, tt.unit)
			must(t, err)
			_, end := out.Bounds()
			if d%tt.unit != 0 || !end.Before(tt.now) || !end.Add(tt.unit).After(tt.now) && !end.Add(tt.unit).Equal(tt.now) {
				t.Fatalf("shift %s puts the end at %s for now %s", d, end, tt.now)
			}
		})
	}
	if _, _, err := sc.ShiftBefore(fxBase, 0); !errors.Is(err, larktest.ErrInvalidOptions) {
		t.Fatalf("zero unit: %v", err)
	}
}

func TestScenarioCopiesAreIndependent(t *testing.T) {
	sc := fixture(t)
	c := sc.Clone()
	must(t, c.AddEdit(larktest.Edit{MessageID: fxID(1), UpdateTime: fxBase.Add(time.Hour), Content: `{"text":"x"}`}))
	if len(sc.Edits()) == len(c.Edits()) || sc.Messages()[0].Edits != 0 {
		t.Fatal("editing a clone changed the original")
	}
	evs := sc.Events()
	evs[0].Body[0] = 'X'
	if sc.Events()[0].Body[0] == 'X' {
		t.Fatal("Events exposes the scenario's bodies")
	}
}

func TestMessagesSummary(t *testing.T) {
	byID := map[ids.MessageID]larktest.MessageInfo{}
	for _, m := range fixture(t).Messages() {
		byID[m.ID] = m
	}
	tests := []struct {
		id   ids.MessageID
		want func(larktest.MessageInfo) bool
	}{
		{fxID(3), func(m larktest.MessageInfo) bool { return m.ThreadID == fxThread && m.RootID == "" }},
		{fxReply(1), func(m larktest.MessageInfo) bool { return m.ThreadID == fxThread && m.RootID == fxID(3) }},
		{fxID(4), func(m larktest.MessageInfo) bool { return m.FromApp && m.Type == "interactive" }},
		{fxID(2), func(m larktest.MessageInfo) bool { return m.Edits == 1 && !m.FromApp }},
		{fxID(7), func(m larktest.MessageInfo) bool { return m.Recalled }},
		{fxID(10), func(m larktest.MessageInfo) bool { return m.Deliver == larktest.DeliverTwice }},
		{fxID(11), func(m larktest.MessageInfo) bool { return m.Deliver == larktest.DeliverDrop }},
	}
	for _, tt := range tests {
		t.Run(string(tt.id), func(t *testing.T) {
			if m, ok := byID[tt.id]; !ok || !tt.want(m) {
				t.Fatalf("%+v", m)
			}
		})
	}
}

func TestLoadFile(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.jsonl")
	must(t, os.WriteFile(good, []byte(validHead), 0o600))
	if _, err := larktest.LoadFile(good); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.jsonl")
	must(t, os.WriteFile(bad, []byte(validHead+`{"kind":"x"}`), 0o600))
	if _, err := larktest.LoadFile(bad); err == nil || !strings.Contains(err.Error(), "bad.jsonl") || !strings.Contains(err.Error(), "line 6") {
		t.Fatalf("err = %v, want the file and line named", err)
	}
	if _, err := larktest.LoadFile(filepath.Join(dir, "missing.jsonl")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
}

func TestParseBoundsTheErrorList(t *testing.T) {
	var b strings.Builder
	b.WriteString(validHead)
	for range 150 {
		b.WriteString("{\"kind\":\"x\"}\n")
	}
	_, err := larktest.Parse(strings.NewReader(b.String()))
	if n := strings.Count(err.Error(), "unknown kind"); n != 100 {
		t.Fatalf("%d line errors reported, want 100", n)
	}
	if !strings.Contains(err.Error(), fmt.Sprintf("stopped after %d", 100)) {
		t.Fatal("no note that reporting stopped")
	}
}

func TestFailedAddChangesNothing(t *testing.T) {
	sc := fixture(t)
	var before bytes.Buffer
	_, err := sc.WriteTo(&before)
	must(t, err)
	b := larktest.Builder{}
	bad := []error{
		sc.AddEvent(larktest.DeliverOnce, b.Text(larktest.Msg{ID: fxID(1), Chat: fxChat, From: larktest.Author{OpenID: fxAlice}, At: fxBase}, "again")),
		sc.AddEvent(larktest.DeliverOnce, b.Recall(fxID(7), fxChat, fxBase.Add(time.Hour), "")),
		sc.AddEdit(larktest.Edit{MessageID: fxID(9), UpdateTime: fxBase.Add(time.Hour), Content: `{}`}),
		sc.AddBinding("ws-unknown", fxChat),
		sc.AddUser(larktest.User{OpenID: fxAlice, Name: "again"}),
		sc.AddWorkspace(larktest.Workspace{ID: fxWS, Type: "incident", Status: "firing", CreatedAt: fxBase}),
	}
	for i, err := range bad {
		if !errors.Is(err, larktest.ErrInvalidScenario) {
			t.Fatalf("addition %d: err = %v", i, err)
		}
	}
	var after bytes.Buffer
	_, err = sc.WriteTo(&after)
	must(t, err)
	if !bytes.Equal(before.Bytes(), after.Bytes()) {
		t.Fatal("failed additions changed the scenario")
	}
	n := len(strings.Split(strings.TrimSpace(before.String()), "\n"))
	must(t, sc.AddUser(larktest.User{OpenID: "ou_carol", Name: "Carol"}))
	if u := sc.Users(); u[len(u)-1].Line != n+1 {
		t.Fatalf("next line %d, want %d: failed additions must not take line numbers", u[len(u)-1].Line, n+1)
	}
}
