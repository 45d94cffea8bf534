package windows

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/larkline/larkline/internal/testenv/testkafka"
	"github.com/larkline/larkline/schemas/ids"
)

// The SIGKILL test runs window processors as child processes (internal/crashchild,
// built without the race detector so that two of them keep up on a small machine),
// on the real broker, with LevelDB state that survives the kills as it does on a
// real host.

// buildChild builds internal/crashchild into the test's temporary directory.
func buildChild(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "crashchild")
	out, err := exec.Command("go", "build", "-o", bin, "./internal/crashchild").CombinedOutput()
	if err != nil {
		t.Fatalf("building the child processor: %v\n%s", err, out)
	}
	return bin
}

// child is one running child process.
type child struct {
	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

func startChild(t *testing.T, bin string, env []string) *child {
	t.Helper()
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting a child processor: %v", err)
	}
	c := &child{cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(c.done)
	}()
	return c
}

// TestIntegrationSIGKILLTwoInstances: two processor processes share 500 chats'
// 100,000 evidence records; one of them, chosen at random, is SIGKILLed every
// 0.2–3 s and started again on its own state directory. Afterwards the set of
// windows in the closed-window topic is exactly the set of windows with evidence,
// every window's record names exactly its versions (count and offset range: the
// processes start behind their input, every window already due), and every copy of
// a window's record is byte-identical.
func TestIntegrationSIGKILLTwoInstances(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	version := uniqueVersion(t)
	c.dropGokaTopics("", version)
	const chats, perChat = 500, 200
	base := time.Now().Add(-3 * time.Hour).Truncate(10 * time.Minute)
	want := map[string]bool{}
	var krs []*kgo.Record
	for i := range perChat {
		for ch := range chats {
			chat := ids.ChatID(fmt.Sprintf("oc_kill%03d", ch))
			at := base.Add(time.Duration(i) * 18 * time.Second) // 200 × 18 s = one hour: six windows
			r := chatRecord(ws, chat, fmt.Sprintf("om_%03d_%03d", ch, i), at, fmt.Sprintf("%d-%d", ch, i))
			v, err := c.codecs.Evidence.Encode(context.Background(), r)
			if err != nil {
				t.Fatal(err)
			}
			krs = append(krs, &kgo.Record{Topic: c.evidence, Key: []byte(r.Key()), Value: v})
			want[ids.ChatKey(ws, chat)+"@"+ids.WindowStart(at, 10*time.Minute).Format(time.RFC3339)] = true
		}
	}
	// every window's record must name exactly its versions: count and offset range
	type span struct {
		n      int
		lo, hi int64
	}
	spans := map[string]*span{}
	for i := 0; i < len(krs); i += 5000 {
		res := testkafka.Produce(t, c.producer, krs[i:min(i+5000, len(krs))]...)
		for _, r := range res {
			ev, err := c.codecs.Evidence.Decode(context.Background(), r.Record.Value)
			if err != nil {
				t.Fatal(err)
			}
			id := ids.ChatKey(ev.WorkspaceID, ev.ChatID) + "@" + ids.WindowStart(ev.OccurredAt, 10*time.Minute).Format(time.RFC3339)
			sp := spans[id]
			if sp == nil {
				sp = &span{lo: r.Record.Offset, hi: r.Record.Offset}
				spans[id] = sp
			}
			sp.n++
			sp.lo, sp.hi = min(sp.lo, r.Record.Offset), max(sp.hi, r.Record.Offset)
		}
	}
	bin := buildChild(t)
	env := func(state string) []string {
		return []string{
			"LARKLINE_WINDOWS_CHILD_BROKERS=" + strings.Join(c.brokers, ","),
			"LARKLINE_WINDOWS_CHILD_VERSION=" + version,
			"LARKLINE_WINDOWS_CHILD_EVIDENCE=" + c.evidence, "LARKLINE_WINDOWS_CHILD_CLOSED=" + c.closed,
			"LARKLINE_WINDOWS_CHILD_DEAD=" + c.dead, "LARKLINE_WINDOWS_CHILD_STATE=" + state}
	}
	dirs := []string{filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")}
	kids := []*child{startChild(t, bin, env(dirs[0])), startChild(t, bin, env(dirs[1]))}
	t.Cleanup(func() {
		for _, k := range kids {
			_ = k.cmd.Process.Kill()
			<-k.done
		}
	})

	// read the closed topic as it fills
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.brokers...), kgo.ConsumeTopics(c.closed),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	copies := map[string][]byte{}
	dups, diffs := 0, 0
	var extra, short []string
	read := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			w, err := c.codecs.ClosedWindow.Decode(context.Background(), r.Value)
			if err != nil {
				t.Fatalf("closed record: %v", err)
			}
			id := w.Key() + "@" + w.WindowStart.Format(time.RFC3339)
			if !want[id] {
				extra = append(extra, id)
			}
			if prev, ok := copies[id]; ok {
				dups++
				if !bytes.Equal(prev, r.Value) {
					diffs++
					t.Errorf("window %s: copies differ:\n %x\n %x", id, prev, r.Value)
				}
				return
			}
			copies[id] = r.Value
			if sp := spans[id]; sp != nil && (w.EvidenceCount != sp.n || w.EvidenceLowOffset != sp.lo || w.EvidenceEndOffset != sp.hi+1) {
				short = append(short, fmt.Sprintf("%s: %d versions [%d,%d), want %d [%d,%d)",
					id, w.EvidenceCount, w.EvidenceLowOffset, w.EvidenceEndOffset, sp.n, sp.lo, sp.hi+1))
			}
		})
	}

	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	killsUntil := time.Now().Add(30 * time.Second)
	kills := 0
	deadline := time.Now().Add(6 * time.Minute)
	next := time.Now().Add(200*time.Millisecond + time.Duration(rng.Int64N(int64(2800*time.Millisecond))))
	for len(copies) < len(want) {
		if time.Now().After(deadline) {
			t.Fatalf("after %d kills only %d of %d windows reached the closed topic", kills, len(copies), len(want))
		}
		if now := time.Now(); now.Before(killsUntil) && now.After(next) {
			i := rng.IntN(len(kids))
			_ = kids[i].cmd.Process.Signal(syscall.SIGKILL)
			<-kids[i].done
			kills++
			kids[i] = startChild(t, bin, env(dirs[i]))
			next = now.Add(200*time.Millisecond + time.Duration(rng.Int64N(int64(2800*time.Millisecond))))
		}
		read()
	}
	// let re-announcements and late copies arrive, then check them too
	settle := time.Now().Add(8 * time.Second)
	for time.Now().Before(settle) {
		read()
	}
	if len(extra) > 0 {
		t.Fatalf("%d closed records for windows without evidence, e.g. %s", len(extra), extra[0])
	}
	if len(short) > 0 {
		t.Fatalf("%d of %d windows closed without all their versions, e.g. %s", len(short), len(copies), short[0])
	}
	if kills == 0 {
		t.Fatal("no instance was killed")
	}
	t.Logf("%d kills; %d windows, %d duplicate copies (%d differing)", kills, len(copies), dups, diffs)
}
