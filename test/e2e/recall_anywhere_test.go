package e2e

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/larkline/larkline/connectors/lark/larktest"
	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/schemas/ids"
)

// invNoRecalledText is the chaos run's last invariant (issue #29).
const invNoRecalledText = "no recalled text anywhere"

// recalledNonces is the nonce of every message recalled so far.
func (tr *chaosTraffic) recalledNonces() []string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	var out []string
	for _, m := range tr.msgs {
		if m.recalled {
			out = append(out, m.nonce)
		}
	}
	return out
}

// recallAfterRecovery (issue #29) picks up to n messages that are not recalled and not
// the bot's, one per chat, turns every workspace bound to their chats recovered, and
// only then recalls them through the webhook: the recall must still reach every
// workspace that holds them. It refreshes p.sc so the checks know the recalls.
func (p *pipeline) recallAfterRecovery(ctx context.Context, tr *chaosTraffic, n int) []ids.MessageID {
	p.t.Helper()
	st, err := store.New(p.pool)
	if err != nil {
		p.t.Fatal(err)
	}
	tr.mu.Lock()
	var picked []*chaosMsg
	chats := map[ids.ChatID]bool{}
	for _, m := range tr.msgs {
		if len(picked) < n && !m.bot && !m.recalled && !chats[m.chat] {
			picked = append(picked, m)
			chats[m.chat] = true
		}
	}
	tr.mu.Unlock()
	for _, b := range p.sc.Bindings() {
		if chats[b.ChatID] {
			if _, err := st.SetWorkspaceStatus(ctx, b.WorkspaceID, store.WorkspaceRecovered); err != nil {
				p.t.Fatalf("recovering %s: %v", b.WorkspaceID, err)
			}
		}
	}
	now := time.Now()
	var out []ids.MessageID
	for _, m := range picked {
		if err := p.lark.AddEvent(larktest.DeliverOnce, larktest.Builder{}.Recall(m.id, m.chat, now, "")); err != nil {
			p.t.Fatalf("recalling %s: %v", m.id, err)
		}
		tr.mu.Lock()
		m.recalled = true
		tr.mu.Unlock()
		out = append(out, m.id)
	}
	p.deliver(ctx)
	p.sc = p.lark.Scenario()
	return out
}

// recalledTextAnywhere counts every place a recalled message's text (its nonce) is
// still found: Postgres text columns (evidence, entries, summaries), the evidence
// topic read to its end (the record at each key's latest offset: what compaction
// keeps), and every process's log.
func (p *pipeline) recalledTextAnywhere(ctx context.Context, nonces []string) (invariantResult, error) {
	inv := invariantResult{name: invNoRecalledText}
	if len(nonces) == 0 {
		return inv, nil
	}
	for _, q := range []struct{ what, sql string }{
		{"evidence", `SELECT workspace_id || ' ' || source_key FROM workspace_timeline_evidence e
			WHERE EXISTS (SELECT 1 FROM unnest($1::text[]) n WHERE e.content LIKE '%' || n || '%')`},
		{"entry", `SELECT workspace_id || ' ' || id FROM workspace_timeline_entries e
			WHERE EXISTS (SELECT 1 FROM unnest($1::text[]) n WHERE e.title LIKE '%' || n || '%' OR e.body LIKE '%' || n || '%')`},
		{"summary", `SELECT workspace_id || ' ' || source FROM workspace_timeline_summaries s
			WHERE EXISTS (SELECT 1 FROM unnest($1::text[]) n WHERE s.text LIKE '%' || n || '%')`},
	} {
		rows, err := p.pool.Query(ctx, q.sql, nonces)
		if err != nil {
			return inv, fmt.Errorf("looking for recalled text in %s: %w", q.what, err)
		}
		for rows.Next() {
			var where string
			if err := rows.Scan(&where); err != nil {
				rows.Close()
				return inv, err
			}
			inv.violations++
			inv.examples = append(inv.examples, q.what+" "+where)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return inv, err
		}
	}
	latest := map[string]*kgo.Record{}
	p.readTopic(ctx, p.topic("evidence"), func(r *kgo.Record) { latest[string(r.Key)] = r })
	codecs := p.codecs()
	for key, r := range latest {
		if len(r.Value) == 0 {
			continue // a tombstone
		}
		ev, err := codecs.Evidence.Decode(ctx, r.Value)
		if err != nil {
			continue // parked by the stages; not evidence
		}
		for _, n := range nonces {
			if strings.Contains(ev.Content, n) {
				inv.violations++
				inv.examples = append(inv.examples, fmt.Sprintf("evidence topic %s at %d/%d", key, r.Partition, r.Offset))
				break
			}
		}
	}
	scan, err := p.scanLogsFor(nonces)
	if err != nil {
		return inv, err
	}
	for _, f := range scan.findings {
		inv.violations++
		inv.examples = append(inv.examples, fmt.Sprintf("log of %s line %d", f.proc, f.line))
	}
	return inv, nil
}
