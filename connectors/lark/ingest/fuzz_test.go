package ingest

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/larkline/larkline/connectors/lark/larktest"
	"github.com/larkline/larkline/internal/store"
)

// Fuzz modes: how the fuzzed bytes reach the webhook.
const (
	fuzzRawSigned   = 0 // the bytes are the HTTP body, correctly signed
	fuzzRawUnsigned = 1 // the bytes are the HTTP body, without signature headers
	fuzzPlaintext   = 2 // the bytes are the plaintext, encrypted and signed as Lark does
)

// FuzzWebhookDecode drives the webhook's decode path — signature check, the SDK's
// ParseReq and DecryptEvent, envelope parsing, the SDK's typed event decoding, the
// normalizer — with arbitrary bodies and plaintexts. Whatever arrives, the webhook
// must not panic, must answer JSON with a status from its documented set, must never
// fail internally, and must produce valid evidence only for an acknowledged event.
// Normal test runs execute the seed corpus only.
func FuzzWebhookDecode(f *testing.F) {
	now := time.Now()
	b := larktest.Builder{AppID: tApp, TenantKey: tTenant, Token: tToken}
	seed := func(env larktest.Envelope) []byte {
		raw, err := env.JSON()
		if err != nil {
			f.Fatal(err)
		}
		return raw
	}
	text := seed(b.Text(msg("om_seed1", now), "checkout 5xx at 35%"))
	post := seed(b.Post(msg("om_seed2", now), "Update", []larktest.Elem{larktest.TextElem("rollback "), larktest.LinkElem("PR", "https://x")}))
	card := seed(b.Card(msg("om_seed3", now), "Alert", []larktest.Elem{larktest.ButtonElem("Ack", "primary")}))
	recall := seed(b.Recall("om_seed1", tChat, now, ""))
	challenge := []byte(`{"challenge":"c-1","token":"` + tToken + `","type":"url_verification"}`)
	encrypted := func(plain []byte) []byte {
		enc, err := larktest.Encrypt(tKey, plain)
		if err != nil {
			f.Fatal(err)
		}
		body, _ := json.Marshal(map[string]string{"encrypt": enc})
		return body
	}
	for _, p := range [][]byte{text, post, card, recall, challenge, []byte(`{}`), []byte(`{"schema":"2.0","header":{}}`), nil} {
		f.Add(byte(fuzzPlaintext), p)
	}
	for _, body := range [][]byte{encrypted(text), encrypted(challenge), []byte(`{"encrypt":""}`), []byte(`{"encrypt":"AAAAAAAAAAAAAAAAAAAAAA=="}`),
		[]byte(`{"encrypt":"` + string(bytes.Repeat([]byte("A"), 64)) + `"}`), []byte("not json"), nil} {
		f.Add(byte(fuzzRawSigned), body)
		f.Add(byte(fuzzRawUnsigned), body)
	}

	u := newUnit(f, unitOptions{key: tKey, maxBody: 64 << 10})
	u.src.bind(tChat, tWS, store.WorkspaceFiring, now.Add(-time.Hour))
	allowed := map[int]bool{200: true, 400: true, 401: true, 405: true, 413: true, 422: true, 503: true}

	f.Fuzz(func(t *testing.T, mode byte, data []byte) {
		var req *http.Request
		switch mode % 3 {
		case fuzzPlaintext:
			r, err := u.sender.Request(context.Background(), tURL, data)
			if err != nil {
				t.Fatal(err)
			}
			req = r
		case fuzzRawSigned:
			req = signed(t, data, tKey, nowTS())
		default:
			r, err := http.NewRequest(http.MethodPost, tURL, bytes.NewReader(data))
			if err != nil {
				t.Fatal(err)
			}
			req = r
		}
		before := len(u.producer.records())
		rec := httptest.NewRecorder()
		u.hook.ServeHTTP(rec, req.WithContext(context.Background()))
		if !allowed[rec.Code] {
			t.Fatalf("status %d (body %q)", rec.Code, rec.Body.String())
		}
		var answer map[string]string
		if err := json.Unmarshal(rec.Body.Bytes(), &answer); err != nil {
			t.Fatalf("answer is not a JSON object: %q", rec.Body.String())
		}
		if mode%3 == fuzzRawUnsigned && rec.Code == 200 && answer["challenge"] == "" && answer["msg"] == "success" {
			t.Fatalf("an unsigned request was accepted as an event: %v", answer)
		}
		produced := u.producer.records()[before:]
		if len(produced) > 0 && (rec.Code != 200 || answer["msg"] != "success") {
			t.Fatalf("produced %d records for answer %d %v", len(produced), rec.Code, answer)
		}
		for _, r := range produced {
			ev, err := u.codec.Decode(context.Background(), r.Value)
			if err != nil {
				t.Fatalf("produced an undecodable record: %v", err)
			}
			if err := ev.Validate(); err != nil {
				t.Fatalf("produced an invalid record: %v", err)
			}
		}
	})
}
