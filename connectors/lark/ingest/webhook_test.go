package ingest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	larkim "github.com/larksuite/oapi-sdk-go/v3/service/im/v1"

	"github.com/larkline/larkline/connectors/lark/bindings"
	"github.com/larkline/larkline/connectors/lark/larktest"
	"github.com/larkline/larkline/connectors/lark/normalize"
	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/schemas"
	"github.com/larkline/larkline/schemas/ids"
)

// signed builds a POST with body and the three signature headers computed with key
// at timestamp ts.
func signed(t testing.TB, body []byte, key, ts string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, tURL, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json; charset=utf-8")
	req.Header.Set(larktest.HeaderTimestamp, ts)
	req.Header.Set(larktest.HeaderNonce, "nonce-1")
	req.Header.Set(larktest.HeaderSignature, larktest.Signature(ts, "nonce-1", key, body))
	return req
}

func encryptedBody(t testing.TB, key string, plaintext []byte) []byte {
	t.Helper()
	enc, err := larktest.Encrypt(key, plaintext)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(map[string]string{"encrypt": enc})
	return b
}

func nowTS() string { return strconv.FormatInt(time.Now().Unix(), 10) }

// TestWebhookAnswers runs one callback per case through a webhook with an encrypt key
// (the production setting) and checks the answer, the counter, and what was produced.
func TestWebhookAnswers(t *testing.T) {
	now := time.Now()
	created := now.Add(-time.Hour)
	at := now.Add(-time.Minute)
	b := larktest.Builder{AppID: tApp, TenantKey: tTenant, Token: tToken}
	text := func(id string) []byte { return envJSON(t, b.Text(msg(id, at), "the database is down")) }

	tests := []struct {
		name    string
		request func(u *unit) *http.Request
		status  int
		outcome Outcome
		reason  string
		records int
	}{
		{"text message in a bound chat", func(u *unit) *http.Request { return u.request(text("om_ok")) },
			200, OutcomeAccepted, ReasonOK, 1},
		{"forged signature", func(u *unit) *http.Request {
			r := u.request(text("om_forged"))
			r.Header.Set(larktest.HeaderSignature, strings.Repeat("ab", 32))
			return r
		}, 400, OutcomeRejected, ReasonBadSignature, 0},
		{"body changed after signing", func(u *unit) *http.Request {
			r := u.request(text("om_tampered"))
			body := encryptedBody(t, tKey, text("om_other"))
			r.Body, r.ContentLength = readCloser(body), int64(len(body))
			return r
		}, 400, OutcomeRejected, ReasonBadSignature, 0},
		{"signature made with another key", func(u *unit) *http.Request {
			return signed(t, encryptedBody(t, tKey, text("om_k")), "another-key", nowTS())
		}, 400, OutcomeRejected, ReasonBadSignature, 0},
		{"unsigned body encrypted with another key is not decrypted", func(u *unit) *http.Request {
			r, _ := http.NewRequest(http.MethodPost, tURL, bytes.NewReader(encryptedBody(t, "another-key", text("om_unsigned_other"))))
			return r
		}, 400, OutcomeRejected, ReasonMissingSignature, 0},
		{"unsigned event although a key is set", func(u *unit) *http.Request {
			r := u.request(text("om_unsigned"))
			for _, h := range []string{larktest.HeaderSignature, larktest.HeaderNonce, larktest.HeaderTimestamp} {
				r.Header.Del(h)
			}
			return r
		}, 400, OutcomeRejected, ReasonMissingSignature, 0},
		{"signature without nonce", func(u *unit) *http.Request {
			r := u.request(text("om_nononce"))
			r.Header.Del(larktest.HeaderNonce)
			return r
		}, 400, OutcomeRejected, ReasonMissingSignature, 0},
		{"stale timestamp", func(u *unit) *http.Request {
			ts := strconv.FormatInt(time.Now().Add(-10*time.Minute).Unix(), 10)
			return signed(t, encryptedBody(t, tKey, text("om_stale")), tKey, ts)
		}, 400, OutcomeRejected, ReasonStaleTimestamp, 0},
		{"timestamp from the future", func(u *unit) *http.Request {
			ts := strconv.FormatInt(time.Now().Add(10*time.Minute).Unix(), 10)
			return signed(t, encryptedBody(t, tKey, text("om_future")), tKey, ts)
		}, 400, OutcomeRejected, ReasonStaleTimestamp, 0},
		{"timestamp in milliseconds", func(u *unit) *http.Request {
			ts := strconv.FormatInt(time.Now().UnixMilli(), 10)
			return signed(t, encryptedBody(t, tKey, text("om_ms")), tKey, ts)
		}, 400, OutcomeRejected, ReasonStaleTimestamp, 0},
		{"timestamp not a number", func(u *unit) *http.Request {
			return signed(t, encryptedBody(t, tKey, text("om_nan")), tKey, "yesterday")
		}, 400, OutcomeRejected, ReasonBadTimestamp, 0},
		{"wrong verification token in the header", func(u *unit) *http.Request {
			wrong := larktest.Builder{AppID: tApp, TenantKey: tTenant, Token: "not-the-token"}
			return u.request(envJSON(t, wrong.Text(msg("om_token", at), "hi")))
		}, 400, OutcomeRejected, ReasonBadToken, 0},
		{"encrypted with another key (signed correctly)", func(u *unit) *http.Request {
			return signed(t, encryptedBody(t, "another-key", text("om_key")), tKey, nowTS())
		}, 400, OutcomeRejected, ReasonUndecryptable, 0},
		{"encrypt field is not base64", func(u *unit) *http.Request {
			return signed(t, []byte(`{"encrypt":"!!!not base64!!!"}`), tKey, nowTS())
		}, 400, OutcomeRejected, ReasonUndecryptable, 0},
		{"encrypt field too short for an IV", func(u *unit) *http.Request {
			return signed(t, []byte(`{"encrypt":"AAAA"}`), tKey, nowTS())
		}, 400, OutcomeRejected, ReasonUndecryptable, 0},
		{"plaintext event although a key is set", func(u *unit) *http.Request {
			return signed(t, text("om_plain"), tKey, nowTS())
		}, 400, OutcomeRejected, ReasonMalformedBody, 0},
		{"body is not JSON", func(u *unit) *http.Request {
			return signed(t, []byte("hello"), tKey, nowTS())
		}, 400, OutcomeRejected, ReasonMalformedBody, 0},
		{"decrypts to something that is not JSON", func(u *unit) *http.Request {
			return signed(t, encryptedBody(t, tKey, []byte(`{"schema":`)), tKey, nowTS())
		}, 400, OutcomeRejected, ReasonUndecryptable, 0},
		{"v1 envelope without header", func(u *unit) *http.Request {
			return u.request([]byte(`{"uuid":"x","token":"` + tToken + `","type":"event_callback","event":{"type":"message"}}`))
		}, 400, OutcomeRejected, ReasonMissingHeader, 0},
		{"GET", func(u *unit) *http.Request {
			r, _ := http.NewRequest(http.MethodGet, tURL, nil)
			return r
		}, 400, OutcomeRejected, ReasonMethodNotAllowed, 0},
		{"missing message_id", func(u *unit) *http.Request {
			return u.request(envJSON(t, b.Text(larktest.Msg{Chat: tChat, From: larktest.Author{OpenID: tAlice}, At: at}, "x")))
		}, 400, OutcomeRejected, normalize.ReasonMissingID, 0},
		{"missing chat_id", func(u *unit) *http.Request {
			return u.request(envJSON(t, b.Text(larktest.Msg{ID: "om_nochat", From: larktest.Author{OpenID: tAlice}, At: at}, "x")))
		}, 400, OutcomeRejected, normalize.ReasonMissingID, 0},
		{"missing sender", func(u *unit) *http.Request {
			return u.request(envJSON(t, b.Text(larktest.Msg{ID: "om_nosender", Chat: tChat, At: at}, "x")))
		}, 400, OutcomeRejected, normalize.ReasonMissingID, 0},
		{"invalid chat id", func(u *unit) *http.Request {
			m := msg("om_badchat", at)
			m.Chat = "chat/1"
			return u.request(envJSON(t, b.Text(m, "x")))
		}, 400, OutcomeRejected, normalize.ReasonInvalidID, 0},
		{"event without message", func(u *unit) *http.Request {
			return u.request(rawEnvelope(EventTypeMessageReceive, `{"sender":{"sender_id":{"open_id":"ou_a"},"sender_type":"user"}}`))
		}, 400, OutcomeRejected, normalize.ReasonMalformedEnvelope, 0},
		// The event is decoded from the envelope's bytes (one parse of the body):
		// null or mistyped event fields are refused as when the whole body was decoded.
		{"receive event null", func(u *unit) *http.Request {
			return u.request(rawEnvelope(EventTypeMessageReceive, `null`))
		}, 400, OutcomeRejected, normalize.ReasonMalformedEnvelope, 0},
		{"recall event null", func(u *unit) *http.Request {
			return u.request(rawEnvelope(EventTypeMessageRecalled, `null`))
		}, 400, OutcomeRejected, normalize.ReasonMalformedEnvelope, 0},
		{"recall event with a number for message_id", func(u *unit) *http.Request {
			return u.request(rawEnvelope(EventTypeMessageRecalled, `{"message_id":5,"chat_id":"oc_bound"}`))
		}, 400, OutcomeRejected, ReasonMalformedEvent, 0},
		{"receive event with a string for message", func(u *unit) *http.Request {
			return u.request(rawEnvelope(EventTypeMessageReceive, `{"message":"om_1"}`))
		}, 400, OutcomeRejected, ReasonMalformedEvent, 0},
		{"unsupported event type with a field of another type", func(u *unit) *http.Request {
			return u.request(rawEnvelope("im.message.reaction.created_v1", `{"message_id":5}`))
		}, 200, OutcomeIgnored, ReasonUnsupportedEventType, 0},
		{"create_time is a number, not a string", func(u *unit) *http.Request {
			return u.request(rawEnvelope(EventTypeMessageReceive, `{"message":{"message_id":"om_n","chat_id":"oc_bound","create_time":1749736821016}}`))
		}, 400, OutcomeRejected, ReasonMalformedEvent, 0},
		{"create_time not a timestamp", func(u *unit) *http.Request {
			m := b.Text(msg("om_time", at), "x")
			m.Event.(*larktest.ReceiveEvent).Message.CreateTime = "soon"
			return u.request(envJSON(t, m))
		}, 400, OutcomeRejected, normalize.ReasonInvalidTimestamp, 0},
		{"malformed content", func(u *unit) *http.Request {
			return u.request(envJSON(t, b.Message(msg("om_badjson", at), "text", "{not json")))
		}, 400, OutcomeRejected, normalize.ReasonMalformedContent, 0},
		{"p2p chat", func(u *unit) *http.Request {
			m := msg("om_p2p", at)
			m.ChatType = "p2p"
			return u.request(envJSON(t, b.Text(m, "hi")))
		}, 200, OutcomeIgnored, normalize.ReasonP2PChat, 0},
		{"unsupported message type", func(u *unit) *http.Request {
			return u.request(envJSON(t, b.Message(msg("om_hologram", at), "hologram", `{"x":1}`)))
		}, 200, OutcomeIgnored, normalize.ReasonUnsupportedType, 0},
		{"unbound chat", func(u *unit) *http.Request {
			m := msg("om_unbound", at)
			m.Chat = "oc_nobody"
			return u.request(envJSON(t, b.Text(m, "hi")))
		}, 200, OutcomeIgnored, bindings.ReasonUnboundChat, 0},
		{"workspace not firing", func(u *unit) *http.Request {
			m := msg("om_recovered", at)
			m.Chat = "oc_recovered"
			return u.request(envJSON(t, b.Text(m, "hi")))
		}, 200, OutcomeIgnored, bindings.ReasonNotFiring, 0},
		{"workspace too old", func(u *unit) *http.Request {
			m := msg("om_old", at)
			m.Chat = "oc_old"
			return u.request(envJSON(t, b.Text(m, "hi")))
		}, 200, OutcomeIgnored, bindings.ReasonTooOld, 0},
		{"message older than the workspace", func(u *unit) *http.Request {
			return u.request(envJSON(t, b.Text(msg("om_before", created.Add(-time.Minute)), "hi")))
		}, 200, OutcomeIgnored, bindings.ReasonBeforeWorkspace, 0},
		{"unsupported event type", func(u *unit) *http.Request {
			return u.request(rawEnvelope("im.message.message_read_v1", `{"reader":{"reader_id":{"open_id":"ou_a"}},"message_id_list":["om_1"]}`))
		}, 200, OutcomeIgnored, ReasonUnsupportedEventType, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := newUnit(t, unitOptions{key: tKey})
			u.src.bind(tChat, tWS, store.WorkspaceFiring, created)
			u.src.bind("oc_recovered", "ws-2", store.WorkspaceRecovered, created)
			u.src.bind("oc_old", "ws-3", store.WorkspaceFiring, now.Add(-100*time.Hour))
			a := u.serve(tt.request(u))
			if a.status != tt.status {
				t.Errorf("status = %d, want %d (answer %v)", a.status, tt.status, a.body)
			}
			if !strings.HasPrefix(a.ctype, "application/json") {
				t.Errorf("content type = %q, want JSON", a.ctype)
			}
			if got := u.events(tt.outcome, tt.reason); got != 1 {
				t.Errorf("larkline_lark_events_total{%s,%s} = %v, want 1 (answer %v)", tt.outcome, tt.reason, got, a.body)
			}
			if tt.outcome == OutcomeAccepted {
				if a.body["msg"] != "success" {
					t.Errorf("answer = %v, want msg success", a.body)
				}
			} else if tt.outcome == OutcomeRejected {
				// Every rejection looks the same, whatever the stage (issue #29).
				if len(a.body) != 1 || a.body["msg"] != "rejected" || a.allow != "" {
					t.Errorf("answer = %v (Allow %q), want exactly {msg: rejected}", a.body, a.allow)
				}
			} else if a.body["msg"] != string(tt.outcome) || a.body["reason"] != tt.reason {
				t.Errorf("answer = %v, want msg %s reason %s", a.body, tt.outcome, tt.reason)
			}
			if got := len(u.producer.records()); got != tt.records {
				t.Errorf("produced %d records, want %d", got, tt.records)
			}
		})
	}
}

func TestWebhookBodyLimit(t *testing.T) {
	u := newUnit(t, unitOptions{key: tKey, maxBody: 4096})
	body := encryptedBody(t, tKey, envJSON(t, u.builder.Text(msg("om_big", time.Now()), strings.Repeat("x", 8000))))
	a := u.serve(signed(t, body, tKey, nowTS()))
	if a.status != http.StatusBadRequest || u.events(OutcomeRejected, ReasonBodyTooLarge) != 1 {
		t.Fatalf("answer = %d %v, want 400 counted as %s", a.status, a.body, ReasonBodyTooLarge)
	}
}

func TestWebhookOversizedMessage(t *testing.T) {
	u := newUnit(t, unitOptions{key: tKey, maxContent: 1024})
	u.src.bind(tChat, tWS, store.WorkspaceFiring, time.Now().Add(-time.Hour))
	a := u.post(envJSON(t, u.builder.Text(msg("om_huge", time.Now()), strings.Repeat("incident ", 200))))
	if a.status != http.StatusBadRequest || u.events(OutcomeRejected, normalize.ReasonContentTooLarge) != 1 {
		t.Fatalf("answer = %d %v, want 400 counted as %s", a.status, a.body, normalize.ReasonContentTooLarge)
	}
	if n := len(u.producer.records()); n != 0 {
		t.Fatalf("produced %d records, want 0", n)
	}
}

func TestWebhookWithoutEncryptKey(t *testing.T) {
	created := time.Now().Add(-time.Hour)
	tests := []struct {
		name    string
		body    func(u *unit) []byte
		stale   bool
		status  int
		outcome Outcome
		reason  string
	}{
		{"plaintext event", func(u *unit) []byte { return envJSON(t, u.builder.Text(msg("om_p", time.Now()), "hi")) },
			false, 200, OutcomeAccepted, ReasonOK},
		{"plaintext event with a stale timestamp header", func(u *unit) []byte { return envJSON(t, u.builder.Text(msg("om_s", time.Now()), "hi")) },
			true, 400, OutcomeRejected, ReasonStaleTimestamp},
		{"encrypted body but no key configured", func(u *unit) []byte {
			return encryptedBody(t, "some-key", envJSON(t, u.builder.Text(msg("om_e", time.Now()), "hi")))
		}, false, 400, OutcomeRejected, ReasonEncryptedNoKey},
		{"malformed JSON", func(u *unit) []byte { return []byte(`{"schema":"2.0",`) }, false, 400, OutcomeRejected, ReasonMalformedJSON},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := newUnit(t, unitOptions{})
			u.src.bind(tChat, tWS, store.WorkspaceFiring, created)
			req := u.request(tt.body(u))
			if tt.stale {
				req.Header.Set(larktest.HeaderTimestamp, strconv.FormatInt(time.Now().Add(-time.Hour).Unix(), 10))
			}
			a := u.serve(req)
			if a.status != tt.status || u.events(tt.outcome, tt.reason) != 1 {
				t.Fatalf("answer = %d %v, want %d %s/%s", a.status, a.body, tt.status, tt.outcome, tt.reason)
			}
		})
	}
}

func TestWebhookURLVerification(t *testing.T) {
	t.Run("encrypt key, url_verification off: the unsigned challenge is not decrypted", func(t *testing.T) {
		u := newUnit(t, unitOptions{key: tKey}) // URLVerification false: the default
		srv := httptestServer(t, u.hook)
		if err := u.sender.VerifyURL(context.Background(), srv); !errors.Is(err, larktest.ErrChallengeFailed) {
			t.Fatalf("url_verification: %v, want a failed challenge", err)
		}
		if got := u.events(OutcomeRejected, ReasonMissingSignature); got != 1 {
			t.Fatalf("refused challenges counted %v, want 1 as missing_signature", got)
		}
	})
	for _, key := range []string{tKey, ""} {
		t.Run(fmt.Sprintf("encrypt key %q", key), func(t *testing.T) {
			u := newUnit(t, unitOptions{key: key})
			u.hook.verifyURL = true // WebhookOptions.URLVerification
			srv := httptestServer(t, u.hook)
			if err := u.sender.VerifyURL(context.Background(), srv); err != nil {
				t.Fatalf("url_verification: %v", err)
			}
			if got := u.events(OutcomeAccepted, ReasonURLVerification); got != 1 {
				t.Fatalf("url_verification counted %v times, want 1", got)
			}
			wrong := newSender(t, key, "wrong-token", nil)
			if err := wrong.VerifyURL(context.Background(), srv); !errors.Is(err, larktest.ErrChallengeFailed) {
				t.Fatalf("url_verification with a wrong token: %v, want a failed challenge", err)
			}
			if got := u.events(OutcomeRejected, ReasonBadToken); got != 1 {
				t.Fatalf("bad token counted %v times, want 1", got)
			}
		})
	}
}

func TestWebhookProducesOneRecordPerEligibleWorkspace(t *testing.T) {
	u := newUnit(t, unitOptions{key: tKey})
	created := time.Now().Add(-time.Hour)
	u.src.bind(tChat, "ws-a", store.WorkspaceFiring, created)
	u.src.bind(tChat, "ws-b", store.WorkspaceFiring, created)
	u.src.bind(tChat, "ws-c", store.WorkspaceArchived, created)
	var notified []string
	u.ing.notify = func(ws ids.WorkspaceID, chat ids.ChatID) { notified = append(notified, ids.ChatKey(ws, chat)) }

	at := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	m := msg("om_shared", at)
	m.Mentions = []larktest.Mention{{Key: "@_user_1", OpenID: "ou_bob", Name: "Bob"}}
	a := u.post(envJSON(t, u.builder.Text(m, "@_user_1 rollback started")))
	if a.status != 200 {
		t.Fatalf("answer %d %v", a.status, a.body)
	}
	recs := u.decoded()
	if len(recs) != 2 {
		t.Fatalf("produced %d records, want 2", len(recs))
	}
	for i, ws := range []ids.WorkspaceID{"ws-a", "ws-b"} {
		r := recs[i]
		if r.WorkspaceID != ws || r.Key() != ids.EvidenceKey(ws, tChat, "om_shared") {
			t.Errorf("record %d: workspace %s key %s", i, r.WorkspaceID, r.Key())
		}
		if r.Content != "@Bob rollback started" || !r.SynthesisEligible || r.Deleted {
			t.Errorf("record %d: content %q eligible %v deleted %v", i, r.Content, r.SynthesisEligible, r.Deleted)
		}
		if !r.OccurredAt.Equal(at) || r.ActorID != tAlice || r.IngestPath != schemas.IngestEvent || r.MessageType != "text" {
			t.Errorf("record %d: %+v", i, r)
		}
		if r.SourceKey != ids.MessageSourceKey(tChat, "om_shared") {
			t.Errorf("record %d: source key %s", i, r.SourceKey)
		}
	}
	if recs[0].ContentHash != recs[1].ContentHash {
		t.Errorf("the two workspaces' records hash differently")
	}
	produced := u.producer.records()
	for _, r := range produced {
		if d := time.Since(r.Timestamp); d < 0 || d > time.Minute {
			t.Errorf("record timestamp %s is not the observed time", r.Timestamp)
		}
	}
	if fmt.Sprint(notified) != fmt.Sprint([]string{"ws-a/oc_bound", "ws-b/oc_bound"}) {
		t.Errorf("notified %v", notified)
	}
}

func TestWebhookOwnAppMessagesAndCardsAreIneligibleEvidence(t *testing.T) {
	u := newUnit(t, unitOptions{key: tKey})
	u.src.bind(tChat, tWS, store.WorkspaceFiring, time.Now().Add(-time.Hour))
	at := time.Now().Add(-time.Minute)
	own := msg("om_own", at)
	own.From = larktest.Author{OpenID: tBot, Type: larktest.SenderTypeBot}
	card := msg("om_card", at)
	card.From = larktest.Author{OpenID: "ou_alertbot", Type: larktest.SenderTypeBot}
	for _, env := range []larktest.Envelope{
		u.builder.Text(own, "Timeline updated"),
		u.builder.Card(card, "Alert firing", []larktest.Elem{larktest.TextElem("5xx at 30%")}),
	} {
		if a := u.post(envJSON(t, env)); a.status != 200 {
			t.Fatalf("answer %d %v", a.status, a.body)
		}
	}
	recs := u.decoded()
	if len(recs) != 2 {
		t.Fatalf("records = %d, want 2", len(recs))
	}
	want := map[ids.MessageID]string{"om_own": schemas.IneligibleOwnApp, "om_card": schemas.IneligibleInteractiveCard}
	for _, r := range recs {
		if r.SynthesisEligible || r.IneligibleReason != want[r.MessageID] {
			t.Errorf("%s: eligible %v reason %q, want ineligible %q", r.MessageID, r.SynthesisEligible, r.IneligibleReason, want[r.MessageID])
		}
	}
}

func TestWebhookFailuresAreNotAcknowledged(t *testing.T) {
	tests := []struct {
		name   string
		break_ func(u *unit)
		status int
		reason string
	}{
		{"kafka unavailable", func(u *unit) { u.producer.setErr(fmt.Errorf("produce: %w", context.DeadlineExceeded)) }, 503, ReasonKafkaUnavailable},
		{"kafka refuses the record", func(u *unit) { u.producer.setErr(errors.New("MESSAGE_TOO_LARGE")) }, 500, ReasonKafkaError},
		{"postgres unavailable", func(u *unit) {
			u.src.mu.Lock()
			u.src.err = fmt.Errorf("bindings: %w", context.DeadlineExceeded)
			u.src.mu.Unlock()
		}, 503, ReasonTimeout},
		{"postgres refuses", func(u *unit) {
			u.src.mu.Lock()
			u.src.err = errors.New("permission denied for table workspaces")
			u.src.mu.Unlock()
		}, 503, ReasonBindingsUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := newUnit(t, unitOptions{key: tKey})
			u.src.bind(tChat, tWS, store.WorkspaceFiring, time.Now().Add(-time.Hour))
			tt.break_(u)
			a := u.post(envJSON(t, u.builder.Text(msg("om_fail", time.Now()), "hi")))
			if a.status != tt.status || a.body["reason"] != tt.reason || u.events(OutcomeFailed, tt.reason) != 1 {
				t.Fatalf("answer = %d %v, want %d failed/%s", a.status, a.body, tt.status, tt.reason)
			}
		})
	}
}

func TestRecallRedactsKnownMessage(t *testing.T) {
	u := newUnit(t, unitOptions{key: tKey})
	u.src.bind(tChat, tWS, store.WorkspaceFiring, time.Now().Add(-time.Hour))
	at := time.Now().Add(-2 * time.Minute).Truncate(time.Millisecond)
	recallAt := at.Add(time.Minute)
	if a := u.post(envJSON(t, u.builder.Text(msg("om_secret", at), "the password is hunter2"))); a.status != 200 {
		t.Fatalf("receive: %d %v", a.status, a.body)
	}
	if a := u.post(envJSON(t, u.builder.Recall("om_secret", tChat, recallAt, ""))); a.status != 200 || u.events(OutcomeAccepted, ReasonRecall) != 1 {
		t.Fatalf("recall: %d %v", a.status, a.body)
	}
	recs := u.decoded()
	if len(recs) != 2 {
		t.Fatalf("records = %d, want 2", len(recs))
	}
	live, gone := recs[0], recs[1]
	if !gone.Deleted || gone.Content != "" || gone.SynthesisEligible || gone.IneligibleReason != schemas.IneligibleDeleted {
		t.Fatalf("recall version: %+v", gone)
	}
	if gone.ContentHash == live.ContentHash || gone.Key() != live.Key() {
		t.Fatalf("recall version must keep the key and change the hash: %s %s / %s %s", live.Key(), live.ContentHash, gone.Key(), gone.ContentHash)
	}
	if !gone.OccurredAt.Equal(at) || !gone.SourceUpdatedAt.Equal(recallAt) {
		t.Fatalf("recall version occurred %s updated %s, want %s and %s", gone.OccurredAt, gone.SourceUpdatedAt, at, recallAt)
	}
	if strings.Contains(gone.MetadataJSON, "hunter2") {
		t.Fatalf("metadata keeps text: %s", gone.MetadataJSON)
	}
}

func TestRecallEdgeCases(t *testing.T) {
	at := time.Now().Add(-2 * time.Minute)
	t.Run("unknown message without a lookup is ignored", func(t *testing.T) {
		u := newUnit(t, unitOptions{key: tKey})
		u.src.bind(tChat, tWS, store.WorkspaceFiring, time.Now().Add(-time.Hour))
		a := u.post(envJSON(t, u.builder.Recall("om_never", tChat, at, "")))
		if a.status != 200 || a.body["reason"] != ReasonRecallUnknownMessage || len(u.producer.records()) != 0 {
			t.Fatalf("answer %d %v, %d records", a.status, a.body, len(u.producer.records()))
		}
	})
	t.Run("recall naming another chat is rejected", func(t *testing.T) {
		u := newUnit(t, unitOptions{key: tKey})
		created := time.Now().Add(-time.Hour)
		u.src.bind(tChat, tWS, store.WorkspaceFiring, created)
		u.src.bind("oc_other", tWS, store.WorkspaceFiring, created)
		u.post(envJSON(t, u.builder.Text(msg("om_m", at), "hi")))
		a := u.post(envJSON(t, u.builder.Recall("om_m", "oc_other", at.Add(time.Second), "")))
		if a.status != 400 || u.events(OutcomeRejected, ReasonChatMismatch) != 1 || len(u.producer.records()) != 1 {
			t.Fatalf("answer %d %v, %d records", a.status, a.body, len(u.producer.records()))
		}
	})
	t.Run("recall of a message nobody holds writes nothing", func(t *testing.T) {
		u := newUnit(t, unitOptions{key: tKey})
		a := u.post(envJSON(t, u.builder.Recall("om_x", "oc_nobody", at, "")))
		if a.status != 200 || a.body["reason"] != ReasonRecallUnknownMessage || len(u.producer.records()) != 0 {
			t.Fatalf("answer %d %v, %d records", a.status, a.body, len(u.producer.records()))
		}
	})
	t.Run("recall without ids is rejected", func(t *testing.T) {
		u := newUnit(t, unitOptions{key: tKey})
		a := u.post(rawEnvelope(EventTypeMessageRecalled, `{"recall_time":"1749736821016"}`))
		if a.status != 400 || u.events(OutcomeRejected, normalize.ReasonMissingID) != 1 {
			t.Fatalf("answer %d %v", a.status, a.body)
		}
	})
	t.Run("a delivery overtaken by its recall stays redacted", func(t *testing.T) {
		u := newUnit(t, unitOptions{key: tKey})
		u.src.bind(tChat, tWS, store.WorkspaceFiring, time.Now().Add(-time.Hour))
		if a := u.post(envJSON(t, u.builder.Recall("om_late", tChat, at.Add(time.Minute), ""))); a.body["reason"] != ReasonRecallUnknownMessage {
			t.Fatalf("recall first: %v", a.body)
		}
		if a := u.post(envJSON(t, u.builder.Text(msg("om_late", at), "oops, wrong chat"))); a.status != 200 {
			t.Fatalf("late delivery: %d %v", a.status, a.body)
		}
		recs := u.decoded()
		if len(recs) != 1 || !recs[0].Deleted || recs[0].Content != "" {
			t.Fatalf("records %+v, want one redacted version", recs)
		}
	})
}

// historyLookup is a MessageLookup answering every message as a text of Alice in
// tChat, created at.
type historyLookup struct{ at time.Time }

func (h historyLookup) GetMessage(_ context.Context, id ids.MessageID) (*larkim.Message, error) {
	str := func(s string) *string { return &s }
	return &larkim.Message{MessageId: str(string(id)), ChatId: str(string(tChat)), MsgType: str("text"),
		CreateTime: str(strconv.FormatInt(h.at.UnixMilli(), 10)), Body: &larkim.MessageBody{Content: str(`{"text":"from history"}`)},
		Sender: &larkim.Sender{Id: str(tAlice), IdType: str("open_id"), SenderType: str("user")}}, nil
}

// TestRecallReachesEveryHolder (issue #29): a recall of a message we hold is applied in
// every workspace that holds it, whatever the workspace's state or bindings now, and
// after a restart (the store says who holds it); a recall of a message nobody holds
// writes nothing, even in a chat bound to a firing workspace.
func TestRecallReachesEveryHolder(t *testing.T) {
	at := time.Now().Add(-2 * time.Minute)
	created := time.Now().Add(-time.Hour)
	tests := []struct {
		name string
		// before runs after the message was received and before the recall; it returns
		// the unit the recall goes to.
		before func(t *testing.T, u *unit) *unit
		want   []ids.WorkspaceID
	}{
		{"the workspace recovered", func(t *testing.T, u *unit) *unit {
			u.src.unbind(tChat)
			u.src.bind(tChat, tWS, store.WorkspaceRecovered, created)
			return u
		}, []ids.WorkspaceID{tWS}},
		{"the chat was unbound", func(t *testing.T, u *unit) *unit {
			u.src.unbind(tChat)
			return u
		}, []ids.WorkspaceID{tWS}},
		{"after a restart, unbound, held in two workspaces", func(t *testing.T, u *unit) *unit {
			u.src.unbind(tChat)
			u.src.hold("om_secret", tWS, "ws-2")
			return newUnit(t, unitOptions{key: tKey, messages: historyLookup{at}, src: u.src})
		}, []ids.WorkspaceID{tWS, "ws-2"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			u := newUnit(t, unitOptions{key: tKey})
			u.src.bind(tChat, tWS, store.WorkspaceFiring, created)
			if a := u.post(envJSON(t, u.builder.Text(msg("om_secret", at), "the password is hunter2"))); a.status != 200 || len(u.producer.records()) != 1 {
				t.Fatalf("receive: %d %v", a.status, a.body)
			}
			v := tc.before(t, u)
			a := v.post(envJSON(t, v.builder.Recall("om_secret", tChat, at.Add(time.Minute), "")))
			var got []ids.WorkspaceID
			for _, r := range v.decoded() {
				got = append(got, r.WorkspaceID)
				if len(got) > 1 || v != u {
					if !r.Deleted || r.Content != "" {
						t.Fatalf("recall version of %s keeps text: %+v", r.WorkspaceID, r)
					}
				}
			}
			if v == u {
				got = got[1:] // the live version
			}
			if a.status != 200 || v.events(OutcomeAccepted, ReasonRecall) != 1 || !slices.Equal(got, tc.want) {
				t.Fatalf("recall: %d %v, redacted in %v, want %v", a.status, a.body, got, tc.want)
			}
		})
	}
}

func TestNewValidatesOptions(t *testing.T) {
	n := newNormalizer(t, 0)
	codec := newCodec(t)
	res, err := bindings.New(bindings.Options{Source: &memSource{}, WorkspaceTypes: []string{"incident"}})
	if err != nil {
		t.Fatal(err)
	}
	p := &recordingProducer{}
	ok := Options{Normalizer: n, Resolver: res, Holders: &memSource{}, Producer: p, Codec: codec}
	if _, err := New(ok); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		mod  func(*Options)
	}{
		{"no normalizer", func(o *Options) { o.Normalizer = nil }},
		{"no resolver", func(o *Options) { o.Resolver = nil }},
		{"no holders", func(o *Options) { o.Holders = nil }},
		{"no producer", func(o *Options) { o.Producer = nil }},
		{"no codec", func(o *Options) { o.Codec = nil }},
		{"timeout beyond Lark's 3s", func(o *Options) { o.Timeout = 4 * time.Second }},
		{"negative timeout", func(o *Options) { o.Timeout = -time.Second }},
		{"recall lookup as long as the timeout", func(o *Options) { o.Timeout = time.Second; o.RecallLookupTimeout = time.Second }},
		{"negative recent index", func(o *Options) { o.RecentMessages = -1 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := ok
			tt.mod(&o)
			if _, err := New(o); !errors.Is(err, ErrInvalidOptions) {
				t.Fatalf("New = %v, want ErrInvalidOptions", err)
			}
		})
	}
	ing, _ := New(ok)
	whTests := []struct {
		name string
		o    WebhookOptions
	}{
		{"no ingester", WebhookOptions{VerificationToken: "t"}},
		{"no token", WebhookOptions{Ingester: ing}},
		{"skew below a second", WebhookOptions{Ingester: ing, VerificationToken: "t", MaxTimestampSkew: time.Millisecond}},
		{"tiny body limit", WebhookOptions{Ingester: ing, VerificationToken: "t", MaxBodyBytes: 10}},
		{"skew above an hour (the replay window)", WebhookOptions{Ingester: ing, VerificationToken: "t", MaxTimestampSkew: 2 * time.Hour}},
	}
	for _, tt := range whTests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := NewWebhook(tt.o); !errors.Is(err, ErrInvalidOptions) {
				t.Fatalf("NewWebhook = %v, want ErrInvalidOptions", err)
			}
		})
	}
}

func TestResultHTTPStatus(t *testing.T) {
	tests := []struct {
		r    Result
		want int
	}{
		{accepted(ReasonOK, 1), 200},
		{ignored(bindings.ReasonUnboundChat), 200},
		{rejected(ReasonBadSignature, nil), 400},
		{rejected(ReasonStaleTimestamp, nil), 400},
		{rejected(ReasonBodyTooLarge, nil), 400},
		{rejected(normalize.ReasonContentTooLarge, nil), 400},
		{rejected(ReasonInvalidRecord, nil), 400},
		{rejected(normalize.ReasonMissingID, nil), 400},
		{rejected(ReasonMethodNotAllowed, nil), 400},
		{failed(ReasonKafkaUnavailable, nil), 503},
		{failed(ReasonTimeout, nil), 503},
		{failed(ReasonLarkAPIUnavailable, nil), 503},
		{failed(ReasonInternal, nil), 500},
		{failed(ReasonKafkaError, nil), 500},
	}
	for _, tt := range tests {
		t.Run(string(tt.r.Outcome)+"/"+tt.r.Reason, func(t *testing.T) {
			if got := tt.r.HTTPStatus(); got != tt.want {
				t.Fatalf("HTTPStatus = %d, want %d", got, tt.want)
			}
			if tt.r.Outcome.Acknowledged() != (tt.want == 200) {
				t.Fatalf("Acknowledged = %v for status %d", tt.r.Outcome.Acknowledged(), tt.want)
			}
		})
	}
}
