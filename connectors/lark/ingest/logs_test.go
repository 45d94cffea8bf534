package ingest

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/larkline/larkline/internal/logtest"
	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/schemas/ids"
)

// TestLogsCarryNoMessageText runs accepted, ignored, rejected and failed events with
// every log at debug level and checks that neither message text nor secrets reach
// the log, while ids do.
func TestLogsCarryNoMessageText(t *testing.T) {
	var out logtest.Buffer
	log := slog.New(slog.NewJSONHandler(&out, &slog.HandlerOptions{Level: slog.LevelDebug}))
	u := newUnit(t, unitOptions{key: tKey})
	u.ing.log = log.With("component", string(ids.StageIngest))
	hook, err := NewWebhook(WebhookOptions{Ingester: u.ing, VerificationToken: tToken, EncryptKey: tKey})
	if err != nil {
		t.Fatal(err)
	}
	u.hook = hook
	u.src.bind(tChat, tWS, store.WorkspaceFiring, time.Now().Add(-time.Hour))
	const secret = "the root password is hunter2"
	at := time.Now()

	u.post(envJSON(t, u.builder.Text(msg("om_log1", at), secret)))                       // accepted
	u.post(envJSON(t, u.builder.Message(msg("om_log2", at), "text", `{"txt":"`+secret))) // rejected: malformed content
	m := msg("om_log3", at)
	m.ChatType = "p2p"
	u.post(envJSON(t, u.builder.Text(m, secret))) // ignored
	u.producer.setErr(errors.New("broker said no"))
	u.post(envJSON(t, u.builder.Text(msg("om_log4", at), secret))) // failed
	forged := u.request(envJSON(t, u.builder.Text(msg("om_log5", at), secret)))
	forged.Header.Set("X-Lark-Signature", "00")
	u.serve(forged) // rejected: signature
	u.ing.HandleReceive(context.Background(), nil)

	logs := out.String()
	for _, leak := range []string{"hunter2", "root password", tKey, tToken, "encrypt\":\""} {
		if strings.Contains(logs, leak) {
			t.Errorf("log contains %q:\n%s", leak, logs)
		}
	}
	for _, want := range []string{"om_log2", "om_log4", ReasonBadSignature} {
		if !strings.Contains(logs, want) {
			t.Errorf("log lacks %q (ids and reasons must be logged):\n%s", want, logs)
		}
	}
}
