package windows

import (
	"fmt"
	"testing"
	"time"

	"github.com/lovoo/goka"
	"github.com/lovoo/goka/storage"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/larkline/larkline/internal/testenv"
	"github.com/larkline/larkline/schemas"
	"github.com/larkline/larkline/schemas/ids"
)

// TestIntegrationHotStandbyTakeover: with HotStandby an instance keeps the other
// instance's state table partitions up to date while both run, so when the other
// leaves it takes them over without reading their table records again (D42); without
// it, it restores what the other wrote since it last held them. Either way every
// chat's window closes with all of its evidence.
func TestIntegrationHotStandbyTakeover(t *testing.T) {
	t.Parallel()
	for _, standby := range []bool{true, false} {
		t.Run(fmt.Sprintf("hotStandby=%v", standby), func(t *testing.T) {
			t.Parallel()
			c := newCluster(t)
			version, clock := uniqueVersion(t), testenv.NewClock(t0)
			group := GroupName("", version)
			with := func(o *Options) {
				o.HotStandby = standby
				// LevelDB, one directory per instance: a standby copy outlives the
				// session that kept it, as under windows.stateDir
				o.Goka = append(o.Goka, goka.WithStorageBuilder(storage.DefaultBuilder(t.TempDir())))
			}
			const chats = 12
			chat := func(i int) ids.ChatID { return ids.ChatID(fmt.Sprintf("oc_standby%02d", i)) }
			say := func(label string, at time.Duration) {
				var recs []schemas.EvidenceRecord
				for i := range chats {
					recs = append(recs, chatRecord(ws, chat(i), fmt.Sprintf("om_%02d%s", i, label), t0.Add(at), label))
				}
				c.produce(recs...)
			}
			a := c.start(version, clock, with)
			say("a", time.Minute)
			for i := range chats {
				waitFor(t, "chat "+string(chat(i))+" in the first instance", windowHolds(a.p, ids.ChatKey(ws, chat(i)), t0, 1))
			}
			b := c.start(version, clock, with) // b takes some partitions
			applied := func(outcome string) float64 {
				return testutil.ToFloat64(a.p.m.evidence.WithLabelValues(outcome)) +
					testutil.ToFloat64(b.p.m.evidence.WithLabelValues(outcome))
			}
			say("b", 2*time.Minute)
			waitFor(t, "the second messages applied", func() bool { return applied(outOpened)+applied(outAdded) == 2*chats })
			// Every table write of those messages has landed: Goka commits an input
			// record only after the writes it caused were acknowledged.
			for _, topic := range []string{c.evidence, string(group) + "-loop"} {
				testenv.WaitCommitted(t, 60*time.Second, string(group), topic)
			}
			hwm := testenv.PartitionEnds(t, string(goka.GroupTable(group)))
			taken := activePartitions(b.p)
			if len(taken) == 0 {
				t.Fatal("the second instance holds no partition")
			}
			if standby {
				waitFor(t, "standby copies of the second instance's partitions, read to their ends", func() bool {
					st := a.p.Goka().Stats()
					for _, p := range taken {
						ps := st.Group[p]
						if ps == nil || ps.TableStats == nil || ps.TableStats.RunMode == gokaActive ||
							ps.TableStats.Status != goka.PartitionRunning {
							return false
						}
						if nextRead(ps.TableStats) < hwm[p] {
							return false
						}
					}
					return true
				})
			}
			if standby {
				waitFor(t, "larkline_windows_table_partitions{state=standby} to count them", func() bool {
					return testutil.ToFloat64(a.p.m.tablePartitions.WithLabelValues("standby")) == float64(len(taken))
				})
			}
			b.stop() // a takes every partition over
			say("c", 3*time.Minute)
			waitFor(t, "the third messages applied", func() bool {
				if n := applied(outOvertaken); n > 0 {
					t.Fatalf("%.0f notes refused as overtaken after the takeover", n)
				}
				return applied(outOpened)+applied(outAdded) == 3*chats
			})
			// What a read of the taken-over partitions' table records to take them over.
			restored, written := uint(0), int64(0)
			st := a.p.Goka().Stats()
			for _, p := range taken {
				ps := st.Group[p]
				if ps == nil || ps.TableStats == nil || ps.TableStats.RunMode != gokaActive {
					t.Fatalf("partition %d was not taken over: %+v", p, ps)
				}
				restored += ps.TableStats.Input.Count
				written += hwm[p]
			}
			t.Logf("taken over %v (%d table records in all): %d records read to take them over", taken, written, restored)
			if written == 0 {
				t.Fatal("the second instance's partitions hold no table record: nothing to take over")
			}
			switch {
			case standby && restored != 0:
				t.Errorf("with a hot standby, the takeover read %d table records again, want 0", restored)
			case !standby && restored == 0:
				t.Error("without a hot standby, the takeover read no table record: the test cannot tell the two apart")
			}
			c.closeEach(clock, chats, 3)
		})
	}
}

// activePartitions are the partitions p processes (not its standby copies).
func activePartitions(p *Processor) []int32 {
	var parts []int32
	for part, ps := range p.Goka().Stats().Group {
		if ps != nil && ps.TableStats != nil && ps.TableStats.RunMode == gokaActive {
			parts = append(parts, part)
		}
	}
	return parts
}

// nextRead is the table offset a partition table reads next: after the last record it
// read in this session, or where its recovery started when it read none (its local
// copy was at the end already).
func nextRead(ts *goka.TableStats) int64 {
	if ts.Input.Count > 0 {
		return ts.Input.LastOffset + 1
	}
	return ts.Recovery.Offset
}
