package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/larkline/larkline/internal/testenv"
	"github.com/larkline/larkline/schemas/ids"
)

func TestMain(m *testing.M) {
	testenv.Main(m)
}

// newTestPool opens a pool on a fresh, unmigrated database.
func newTestPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	pool, err := OpenPool(context.Background(), PoolConfig{DSN: testenv.PostgresDSN(t), MaxConns: 12})
	if err != nil {
		t.Fatalf("open pool: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// newTestStore returns a Store on a fresh, migrated database.
func newTestStore(t testing.TB) *Store {
	t.Helper()
	pool := newTestPool(t)
	if _, err := Migrate(context.Background(), pool); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	s, err := New(pool)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func hashOf(parts ...string) string {
	h := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	return hex.EncodeToString(h[:])
}

// larkEvidence builds a valid Lark message evidence version.
func larkEvidence(ws ids.WorkspaceID, chat ids.ChatID, msg string, at time.Time, text string) Evidence {
	return Evidence{
		WorkspaceID:       ws,
		Source:            ids.SourceLark,
		SourceType:        ids.SourceTypeLarkMessage,
		SourceKey:         ids.MessageSourceKey(chat, ids.MessageID(msg)),
		OccurredAt:        at,
		SourceUpdatedAt:   at,
		ActorID:           "ou_actor",
		Content:           text,
		ContentHash:       hashOf(text, "live"),
		Metadata:          []byte(fmt.Sprintf(`{"chat_id":%q,"message_id":%q}`, chat, msg)),
		SynthesisEligible: true,
	}
}

func mustUpsert(t testing.TB, s *Store, batch ...Evidence) []UpsertOutcome {
	t.Helper()
	out, err := s.UpsertEvidence(context.Background(), batch)
	if err != nil {
		t.Fatalf("upsert evidence: %v", err)
	}
	return out
}

func countRows(t testing.TB, s *Store, table, where string, args ...any) int {
	t.Helper()
	var n int
	if err := s.pool.QueryRow(context.Background(), "SELECT count(*) FROM "+table+" WHERE "+where, args...).Scan(&n); err != nil {
		t.Fatalf("count %s: %v", table, err)
	}
	return n
}

var t0 = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
