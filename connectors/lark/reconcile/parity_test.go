package reconcile

import (
	"context"
	"encoding/json"
	"maps"
	"sync"
	"testing"
	"time"

	larkim "github.com/larksuite/oapi-sdk-go/v3/service/im/v1"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/larkline/larkline/connectors/lark/bindings"
	"github.com/larkline/larkline/connectors/lark/ingest"
	"github.com/larkline/larkline/connectors/lark/larkapi"
	"github.com/larkline/larkline/connectors/lark/larktest"
	"github.com/larkline/larkline/connectors/lark/normalize"
	"github.com/larkline/larkline/schemas"
	"github.com/larkline/larkline/schemas/ids"
)

type oneTarget struct{ ws ids.WorkspaceID }

func (o oneTarget) Resolve(_ context.Context, chat ids.ChatID, _ time.Time) (bindings.Resolution, error) {
	return bindings.Resolution{Chat: chat, Targets: []bindings.Target{{Workspace: o.ws, Type: "incident"}}}, nil
}

func (o oneTarget) WorkspacesHoldingMessage(context.Context, ids.ChatID, ids.MessageID) ([]ids.WorkspaceID, error) {
	return []ids.WorkspaceID{o.ws}, nil
}

type capture struct {
	mu   sync.Mutex
	recs []*kgo.Record
}

func (c *capture) ProduceSync(_ context.Context, rs ...*kgo.Record) kgo.ProduceResults {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(kgo.ProduceResults, 0, len(rs))
	for _, r := range rs {
		c.recs = append(c.recs, r)
		out = append(out, kgo.ProduceResult{Record: r})
	}
	return out
}

// TestRecordParityWithEventPath: a message read from history becomes the same
// evidence record as the same message delivered to the event path (package
// ingest), apart from IngestPath, ObservedAt and the chat_type only events carry.
func TestRecordParityWithEventPath(t *testing.T) {
	const (
		ws   = ids.WorkspaceID("ws-parity")
		chat = ids.ChatID("oc_parity")
	)
	l := newLark(t, chat)
	codecs, err := schemas.NewCodecs(schemas.Topics{})
	if err != nil {
		t.Fatal(err)
	}
	norm, err := normalize.New(normalize.Options{SelfAppID: l.appID, SelfBotOpenID: l.botID})
	if err != nil {
		t.Fatal(err)
	}
	cap := &capture{}
	ing, err := ingest.New(ingest.Options{Normalizer: norm, Resolver: oneTarget{ws}, Holders: oneTarget{ws}, Producer: cap, Codec: codecs.Evidence})
	if err != nil {
		t.Fatal(err)
	}
	h, err := larkapi.New(l.client)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	bob := larktest.Mention{Key: "@_user_1", OpenID: "ou_bob", Name: "Bob"}
	// A root of its own for the thread case: once a thread exists, history shows
	// its root's thread_id, which the root's event could not know yet.
	root := msgID("par", 9)
	l.say(t, larktest.DeliverOnce, larktest.Msg{ID: root, Chat: chat, At: at.Add(-time.Minute)}, "root")
	cases := []struct {
		name string
		env  larktest.Envelope
	}{
		{"text with a mention", l.builder.Text(larktest.Msg{ID: msgID("par", 0), Chat: chat, At: at, From: larktest.Author{OpenID: tAlice},
			Mentions: []larktest.Mention{bob}}, "@_user_1 please check the gateway")},
		{"post", l.builder.Post(larktest.Msg{ID: msgID("par", 1), Chat: chat, At: at.Add(time.Second), From: larktest.Author{OpenID: tAlice}},
			"Mitigation", []larktest.Elem{larktest.TextElem("rolled back "), larktest.LinkElem("deploy 42", "https://example.test/42")})},
		{"file", l.builder.File(larktest.Msg{ID: msgID("par", 2), Chat: chat, At: at.Add(2 * time.Second), From: larktest.Author{OpenID: tAlice}},
			"file_v2_abc", "heap.pprof")},
		{"thread reply", l.builder.Text(larktest.Msg{ID: msgID("par", 3), Chat: chat, At: at.Add(3 * time.Second), From: larktest.Author{OpenID: tAlice},
			RootID: root, ParentID: root, ThreadID: "omt_par"}, "on it")},
	}
	for _, tc := range cases {
		env := tc.env
		t.Run(tc.name, func(t *testing.T) {
			if err := l.srv.AddEvent(larktest.DeliverOnce, env); err != nil {
				t.Fatal(err)
			}
			raw, err := env.JSON()
			if err != nil {
				t.Fatal(err)
			}
			var ev larkim.P2MessageReceiveV1
			if err := json.Unmarshal(raw, &ev); err != nil {
				t.Fatal(err)
			}
			cap.mu.Lock()
			cap.recs = nil
			cap.mu.Unlock()
			if res := ing.HandleReceive(context.Background(), &ev); res.Outcome != ingest.OutcomeAccepted {
				t.Fatalf("event path: %+v", res)
			}
			evRec, err := codecs.Evidence.Decode(context.Background(), cap.recs[0].Value)
			if err != nil {
				t.Fatal(err)
			}

			id := ev.Event.Message.MessageId
			container, cid := larkapi.ContainerChat, string(chat)
			if tid := ev.Event.Message.ThreadId; tid != nil && *tid != "" {
				container, cid = larkapi.ContainerThread, *tid
			}
			page, err := h.ListMessages(context.Background(), larkapi.ListQuery{ContainerType: container, ContainerID: cid, PageSize: MaxPageSize})
			if err != nil {
				t.Fatal(err)
			}
			var item *larkim.Message
			for _, it := range page.Items {
				if *it.MessageId == *id {
					item = it
				}
			}
			if item == nil {
				t.Fatalf("message %s not in history", *id)
			}
			in, err := normalize.FromHistoryMessage(item)
			if err != nil {
				t.Fatal(err)
			}
			msg, err := norm.Normalize(in)
			if err != nil {
				t.Fatal(err)
			}
			hRec, err := msg.Evidence(ws, "", evRec.ObservedAt, schemas.IngestReconcile)
			if err != nil {
				t.Fatal(err)
			}
			value, err := codecs.Evidence.Encode(context.Background(), hRec)
			if err != nil {
				t.Fatal(err)
			}
			if hRec, err = codecs.Evidence.Decode(context.Background(), value); err != nil {
				t.Fatal(err)
			}

			var evMeta, hMeta map[string]any
			if err := json.Unmarshal([]byte(evRec.MetadataJSON), &evMeta); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal([]byte(hRec.MetadataJSON), &hMeta); err != nil {
				t.Fatal(err)
			}
			delete(evMeta, schemas.MetaChatType) // only events say the chat type
			if !maps.EqualFunc(evMeta, hMeta, func(a, b any) bool { x, _ := json.Marshal(a); y, _ := json.Marshal(b); return string(x) == string(y) }) {
				t.Fatalf("metadata differs:\nevent   %v\nhistory %v", evMeta, hMeta)
			}
			evRec.MetadataJSON, hRec.MetadataJSON = "", ""
			evRec.IngestPath = schemas.IngestReconcile
			if evRec != hRec {
				t.Fatalf("records differ:\nevent   %+v\nhistory %+v", evRec, hRec)
			}
		})
	}
}
