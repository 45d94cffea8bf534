package workspaces

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/larkline/larkline/internal/conformance"
	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/schemas"
	"github.com/larkline/larkline/schemas/ids"
)

// TestConformance runs the delivery-guarantee suite on the feed Consumer: the
// compacted workspace topic in, the workspaces and workspace_chat_bindings tables
// out, on the real broker and Postgres (newFeedEnv, newStore, feedEnv.consumer).
func TestConformance(t *testing.T) { conformance.Run(t, feedStage{}) }

// feedStage: an entity is a workspace (key = its id); its versions are the ticket
// system re-publishing it with a new feed version, status and set of chats.
type feedStage struct{}

func (feedStage) Versions() int { return 3 }

func (feedStage) Deploy(t *testing.T) conformance.Deployment {
	e := newFeedEnv(t, 3)
	return &feedDeployment{e: e, st: newStore(t), group: "larkline-workspaces-" + e.topic} // the topic is unique
}

type feedDeployment struct {
	e     *feedEnv
	st    *store.Store
	group string
}

func (d *feedDeployment) Wiring() conformance.Wiring {
	return conformance.Wiring{Input: d.e.topic, Group: d.group}
}

func (d *feedDeployment) Start(t *testing.T) func() {
	return d.e.consumer(d.group, applier(t, d.st), nil)
}

// confStatuses cycle with the version, so a stale version shows in the status too.
var confStatuses = []string{"firing", "recovered", "archived"}

// confRecord is version r of the suite's entity as a feed record: the workspace
// keeps one chat and gains one per version, losing the previous version's.
func confRecord(r conformance.Record) schemas.WorkspaceRecord {
	ws := ids.WorkspaceID(fmt.Sprintf("conf-ws-%d", r.Entity))
	return rec(ws, int64(r.Version), confStatuses[(r.Version-1)%len(confStatuses)],
		ids.ChatID(fmt.Sprintf("oc_conf_e%d", r.Entity)), ids.ChatID("oc_conf_"+r.String()))
}

func (d *feedDeployment) Message(t *testing.T, r conformance.Record) conformance.Message {
	wr := confRecord(r)
	b, err := d.e.codecs.Workspace.Encode(context.Background(), wr)
	if err != nil {
		t.Fatalf("encode %v: %v", r, err)
	}
	return conformance.Message{Key: string(wr.ID), Value: b}
}

// Observe renders both tables with snapshot (without the store's own timestamps),
// one line per row.
func (d *feedDeployment) Observe(t *testing.T) conformance.Observation {
	s := strings.TrimSuffix(snapshot(t, d.st), "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// Expect renders, as snapshot does, the last version of every workspace and its chats.
func (d *feedDeployment) Expect(records []conformance.Record) conformance.Observation {
	var o conformance.Observation
	for _, r := range conformance.Latest(records) {
		wr := confRecord(r)
		o = append(o, fmt.Sprintf("workspace %s %s %s %s v%d", wr.ID, wr.Type, wr.Status,
			wr.CreatedAt.UTC().Format(time.RFC3339), wr.Version))
		for _, c := range wr.Chats {
			o = append(o, fmt.Sprintf("binding %s %s", wr.ID, c))
		}
	}
	return o
}
